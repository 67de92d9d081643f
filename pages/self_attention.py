"""Self-attention explorer: a sentence's GloVe vectors through softmax(QKᵀ/√d)V, every step drawn."""

import os
from dataclasses import replace

import numpy as np
import streamlit as st

from appkit.common import (
    URL_TEXT_LIMIT, clamp, held, newcomer_note, load_url_state, md_escape, position, position_select, save_url_state,
    scale_select, stop, word_vectors,
)
from attnviz.export import Matrix
from appkit.interactive import interactive_heatmap, screen_sizes, sentence_box, view_state
from appkit.present import chart, downloads
from appkit.explorer import (
    INTERACTIVE_LIMIT, STEPS_LIMIT, ZOOM_SIZES, Request, browser_sentence, compare_downloads, compute, inside_a_score,
    live_compare, positions_section, step_walk, view_parts, zoom_window,
)
from attnviz import figures
from attnviz.functional import FORMULAS, PARAMETERS, SCORING_NAMES
from attnviz.embeddings import OOV_POLICIES, nearest_words
from attnviz.positions import POSITIONS
from attnviz.sentence import FULL_LIMIT, MASKS, Config, max_tokens_setting, overflow_message, problem, temperature_grid
from attnviz.urlstate import Param, boolean, bounded_text, choice, coerce, encode_bool, encode_int_list, int_list, int_range, nearest

MAX_TOKENS, MAX_TOKENS_PROBLEM = max_tokens_setting(os.environ.get("ATTNVIZ_MAX_TOKENS"))  # a setting: see README
BARS_LIMIT = 64  # above this many keys the query inspector draws only the largest weights
TEXT_CHARS = 200_000  # the sentence box accepts this many characters
B_MASKS = ("none", "causal")  # side B of a comparison has no key list to hide
MASK_NAMES = {"none": "none", "causal": "causal", "keys": "hide keys"}
DEFAULT_TEXT = "When he saw his owner, the dog was happy, so he wagged his tail"
SCHEMA = {
    "text": Param(DEFAULT_TEXT, bounded_text(TEXT_CHARS)),
    "punct": Param(False, boolean, encode_bool),
    "oov": Param("zero", choice(OOV_POLICIES)),
    "scoring": Param("scaled_dot", choice(SCORING_NAMES)),
    "sigma": Param(1.0, nearest([0.25, 0.5, 1.0, 2.0, 4.0, 8.0])),
    "h": Param(16, int_range(1, 128)),
    "temp": Param(1.0, nearest(temperature_grid())),
    "hard": Param(False, boolean, encode_bool),
    "proj": Param("identity", choice(["identity", "random"])),
    "dk": Param(16, int_range(1, 128)),
    "seed": Param(0, int_range(0, 2**31 - 1)),
    "bias": Param(False, boolean, encode_bool),
    "heads": Param(1, int_range(1, 8)),
    "pos": Param("none", choice(POSITIONS)),
    "mask": Param("none", choice(MASKS)),
    "hide": Param([], int_list, encode_int_list),
    "query": Param(0, int_range(0, MAX_TOKENS - 1)),  # positions up to the page's longest text, as a model page's
    "key": Param(-1, int_range(-1, MAX_TOKENS - 1)),  # the key whose score is taken apart; -1: the query's strongest
    "parts": Param(False, boolean, encode_bool),  # "Inside a score" is open
    "near": Param(False, boolean, encode_bool),  # the nearest words to the mix are shown
    "nsort": Param(False, boolean, encode_bool),
    "nhead": Param(0, int_range(0, 7)),
    "head": Param(0, int_range(0, 7)),
    "palette": Param("viridis", choice(figures.PALETTES)),
    "scale": Param("row", choice(figures.SCALES)),
    "zr": Param(0, int_range(0, 100_000)),
    "zc": Param(0, int_range(0, 100_000)),
    "zw": Param(64, nearest(ZOOM_SIZES)),
    "steps": Param(False, boolean, encode_bool),
    "walk": Param(1, int_range(0, 16)),  # the walk's open tab: a step from 1, or 0 for every step
    # Compare mode: side B's sentence (empty: A's) and settings; the rest (vectors, tokens, d_k, seed) A and B share.
    "cmp": Param(False, boolean, encode_bool),
    "b_text": Param("", bounded_text(TEXT_CHARS)),
    "b_scoring": Param("scaled_dot", choice(SCORING_NAMES)),
    "b_temp": Param(1.0, nearest(temperature_grid())),
    "b_hard": Param(False, boolean, encode_bool),
    "b_mask": Param("causal", choice(B_MASKS)),
    "b_proj": Param("identity", choice(["identity", "random"])),
    "b_heads": Param(1, int_range(1, 8)),
    "b_pos": Param("none", choice(POSITIONS)),
}
POSITION_NAMES = {"none": "none (blind to order)", "sinusoidal": "sinusoidal, added to X", "rotary": "rotary (RoPE), on q and k"}
SCORING_HELP = {
    "dot": "q·k: the raw dot product.",
    "scaled_dot": "q·k/√d: the Transformer's choice; dividing by √d keeps the softmax from saturating.",
    "cosine": "q·k/(‖q‖‖k‖): the angle only, ignoring length.",
    "general": "qᵀMk with a seeded random matrix M: works when query and key sizes differ.",
    "additive": "wᵀtanh(W_q q + W_k k): a one-hidden-layer MLP of size h (seeded random).",
    "gaussian": "−‖q−k‖²/2σ²: closer vectors get higher scores (kernel regression).",
}


st.title("Self-attention explorer")
newcomer_note()
st.write(
    "Type a sentence. Each word becomes its word vector (GloVe 6B 50-d, or vectors you upload in the sidebar), and "
    "every word (a query, one row) attends to "
    "every word (a key, one column). A row shows how a word splits its attention; each row sums to 1."
)
load_url_state(SCHEMA)
vectors_slot = st.sidebar.container()  # filled after the controls, so none is lost while an upload waits
with st.sidebar:
    st.toggle("Compare A | B", key="cmp", help="Side by side: this sentence and settings (A) against a second sentence or "
              "other settings (B), on one colour scale, with the difference B − A. The link keeps both.")
    st.header("Attention" + (" (A)" if st.session_state.get("cmp") else ""))
    scoring = st.selectbox(
        "Scoring function a(q, k)", SCORING_NAMES, key="scoring",
        help="How a query and a key are compared. " + " ".join(f"{k}: {v}" for k, v in SCORING_HELP.items()),
    )
    st.latex(r"\small " + FORMULAS[scoring])  # additive's is wider than the sidebar at full size
    if scoring in PARAMETERS:
        st.caption(PARAMETERS[scoring])
    st.select_slider("σ (Gaussian width)", [0.25, 0.5, 1.0, 2.0, 4.0, 8.0], key="sigma", disabled=scoring != "gaussian",
                     help="Used by gaussian scoring only.")
    st.slider("h (additive hidden size)", 1, 128, key="h", disabled=scoring != "additive", help="Used by additive scoring only.")
    st.header("Projections")
    projection = st.radio(
        "Mode", ["identity", "random"], key="proj", horizontal=True,
        help="identity: Q = K = V = X. random: Q = XW_q (+b_q), and so on, with seeded Xavier weights.",
    )
    random_proj = projection == "random"
    needs_random = "Needs random projections: choose Mode → random."
    st.slider("d_k (size per head)", 1, 128, key="dk", disabled=not random_proj,
              help="d_k: the length of each head's query and key vectors. " + needs_random)
    seeded = random_proj or scoring in ("general", "additive") or st.session_state.get("oov") == "random"
    st.number_input("Seed", 0, 2**31 - 1, key="seed", disabled=not seeded,
                    help="Seeds the random projections, the general/additive scoring weights and random OOV vectors; "
                         "greyed out while none of them is in use.")
    st.checkbox("Biases b_q, b_k, b_v", key="bias", disabled=not random_proj, help=needs_random)
    st.slider("Heads H", 1, 8, key="heads", disabled=not random_proj, help="Identity projections would make every head the same. " + needs_random)
    if not random_proj:
        st.caption("d_k, biases and heads apply to random projections.")
    st.header("Positions")
    st.radio("Word order", POSITIONS, key="pos", format_func=POSITION_NAMES.get,
             help="Self-attention alone is blind to order: reorder the words and its weights reorder with them. "
                  "sinusoidal: P(p, 2i) = sin(p/10000^(2i/d)), P(p, 2i+1) = cos(…), added to X. rotary: each pair of "
                  "dimensions of q and k turned by p·θ_i, so a score depends on the offset between two words.")
    # One head, no comparison: the browser draws the heatmap (up to INTERACTIVE_LIMIT tokens; a long input's zoom
    # window at any size). Compare is drawn in the browser too; only the grid of several heads is not.
    interactive = not st.session_state.cmp and not (random_proj and st.session_state.heads > 1)
    st.header("Tokens")
    st.toggle("Drop punctuation", key="punct", help="Remove tokens such as ',' and '.' before embedding.")
    st.radio(
        "Words not in the vocabulary", OOV_POLICIES, key="oov", horizontal=True,
        help="zero: a zero vector; random: a seeded random vector of typical length; drop: leave the word out.",
    )

loaded = word_vectors(vectors_slot)
base = Config(
    scoring=scoring, projection=projection, d_k=st.session_state.dk, seed=st.session_state.seed,
    bias=st.session_state.bias and random_proj, heads=st.session_state.heads if random_proj else 1,
    sigma=st.session_state.sigma, additive_hidden=st.session_state.h, positions=st.session_state.pos,
)


def controls() -> None:
    """τ, hard attention, the mask, the palette and the colour scale as Streamlit widgets (each change reruns this
    fragment): for the one view the browser does not redraw on its own, the grid of several heads."""
    temperature, hard, mask = st.columns(3, vertical_alignment="center")
    temperature.select_slider(
        "Temperature τ (log scale)", temperature_grid(), key="temp",
        help="Scores are divided by τ before the softmax. Small τ sharpens the weights, large τ flattens them.",
    )
    hard.toggle("Hard attention (one-hot argmax)", key="hard", help="Each query takes only its best key. Ties go to the leftmost key.")
    mask.radio(
        "Mask", MASKS, key="mask", horizontal=True, format_func=MASK_NAMES.get,
        help="causal: a word sees only itself and earlier words. hide keys: no word may attend to the chosen words.",
    )
    palette, scale = st.columns(2)
    palette.selectbox("Palette", list(figures.PALETTES), key="palette", help="All three read well with colour blindness.")
    scale_select(scale)


def clean_view(sent: dict) -> dict:
    """A view the browser sent, checked as a link's values are."""
    return coerce(sent, SCHEMA)


@st.fragment
def attention(loaded, base: Config, interactive: bool) -> None:
    """The sentence box and everything drawn from the weights: a new sentence reruns this fragment, not the sidebar.
    With one head and no comparison, the browser computes the weights from the raw scores and redraws on its own as
    τ, hard, the mask, the colour scale and the query change (appkit/interactive); it reruns this fragment once the
    person pauses, so the link, the nearest words and the downloads follow. So does a long input's zoom window, below
    the server's overview, and Compare A | B. With several heads (the grid) τ, hard and the mask are widgets whose
    changes rerun this fragment."""
    load_url_state(SCHEMA)  # again for a run of this fragment alone: the views the heatmap posted, what a stop lost
    # A new sentence is posted to the live heatmap (no run) while none of the server's views below depends on it.
    posts = interactive and not server_views() and base.positions == "none"
    sentence = sentence_box("text", label="Sentence", max_chars=TEXT_CHARS, height=80, heatmap="live", posts=posts,
                            schema=SCHEMA,
                            help=f"Up to {MAX_TOKENS:,} tokens; paste a page of prose to see a long input.")
    if st.session_state.cmp:
        with st.container(border=True):
            st.markdown("**B**: a second sentence, or the same one under other settings. **A** is the sentence above with "
                        "the sidebar's settings; both share the vectors, tokens, d_k and seed.")
            st.text_input("Sentence B (empty: A's sentence)", key="b_text", max_chars=TEXT_CHARS)
            b_left, b_middle, b_right, b_far = st.columns(4)
            b_left.selectbox("Scoring (B)", SCORING_NAMES, key="b_scoring")
            b_middle.radio("Projections (B)", ["identity", "random"], key="b_proj", horizontal=True)
            b_right.slider("Heads (B)", 1, 8, key="b_heads", disabled=st.session_state.b_proj != "random")
            b_far.selectbox("Positions (B)", POSITIONS, key="b_pos", format_func=POSITION_NAMES.get)
            st.caption("B's temperature, hard attention and mask are above its heatmap.")
    if loaded is None:
        stop("Choose the word vectors in the sidebar to see the attention.", SCHEMA)
    kv, vectors_id, vectors_name = loaded
    if not sentence.strip():
        stop("Type a sentence above to see its attention.", SCHEMA)
    if MAX_TOKENS_PROBLEM:
        st.warning(MAX_TOKENS_PROBLEM)

    # The raw scores a(q_i, k_j) do not depend on τ, hard or the mask: the browser applies those.
    raw = Request(vectors_id, sentence, st.session_state.punct, st.session_state.oov, base, MAX_TOKENS)
    with st.spinner("Computing attention…"):
        computed = compute(kv, raw)
    why = problem(computed, MAX_TOKENS)
    if why:
        stop(why[0], SCHEMA, error=why[1])

    tokens, oov = computed.embedded.tokens, computed.embedded.oov
    if any(oov):
        unknown = sorted({t for t, o in zip(tokens, oov) if o})
        st.warning(
            f"{len(unknown)} word(s) are not in the vocabulary and got the '{st.session_state.oov}' policy; "
            f"they are marked {figures.OOV_MARK.strip()} on the axes:"
        )
        st.code(" ".join(unknown), language=None)
    n = len(tokens)
    zoomed = not st.session_state.cmp and n > (INTERACTIVE_LIMIT if interactive else FULL_LIMIT)  # overview + zoom window
    interactive = interactive and not zoomed
    grid = not (interactive or zoomed or st.session_state.cmp)  # several heads, drawn by the server
    if grid:
        controls()
    hidden = [i for i in st.session_state.get("hide", []) if isinstance(i, int) and 0 <= i < n]
    if grid and st.session_state.mask == "keys":
        hidden = held("hide", tokens, lambda v: [i for i in v if isinstance(i, int) and 0 <= i < n] if isinstance(v, list) else [],
                      lambda **widget: st.multiselect(
                          "Keys to hide", list(range(n)), format_func=lambda i: f"{i} · {tokens[i]}", **widget,
                          help="No query may attend to these words. If a word hides every key, its row is all zero."))
    config = replace(base, temperature=st.session_state.temp, hard=st.session_state.hard, mask=st.session_state.mask,
                     hidden=tuple(hidden))
    request = replace(raw, config=config)
    shown = compute(kv, request)  # the weights on screen (at τ, hard, mask): the downloads, nearest words and walk
    counted = "" if interactive else f"{n} token{'s' if n != 1 else ''} · "  # the live heatmap's title counts them
    st.caption(f"{counted}d_model = {computed.view.x.shape[1]} · computed with torch on **{computed.view.device}**")
    everything = Matrix(lambda: compute(kv, request).view.mean_weights, tokens, tokens)  # computed again on a click
    if interactive:
        live_view(kv, vectors_name, raw, computed, shown, config, hidden)
    elif zoomed:
        st.session_state.hide = hidden
        long_input(kv, vectors_name, computed, shown, config, everything)
    elif st.session_state.cmp:
        st.session_state.query, st.session_state.hide = position(tokens, "query"), hidden
        compare_live(kv, vectors_name, raw, request)
    else:
        grid_view(kv, vectors_name, shown, config, everything)


def server_views() -> bool:
    """Whether the server draws a view below the live heatmap from τ, hard, the mask or the query (the nearest words,
    a score taken apart, the walk): then each pause reruns the page."""
    return bool(st.session_state.near or st.session_state.parts or st.session_state.steps)


def heatmap_data(computed, view: dict, sizes: dict) -> dict:
    """The live heatmap's data: the sentence's raw scores, its tokens, and the view it opens with."""
    tokens, oov, n = computed.embedded.tokens, computed.embedded.oov, len(computed.embedded.tokens)
    scores = computed.view.scores_block(0, slice(None), slice(None))  # (n, n)
    title = f"Attention weights α: {n} quer{'ies' if n != 1 else 'y'} × {n} key{'s' if n != 1 else ''}"
    return figures.interactive_heatmap(
        scores, tokens, row_oov=oov, view=view, title=title, taus=temperature_grid(),
        overflow=overflow_message(computed, "The scores divided by τ"), file="attnviz_heatmap", bars_limit=BARS_LIMIT,
        **sizes,
    )


def drawn_alone(computed, text: str) -> bool:
    """Whether the live heatmap is all that `text` changes on the page: no message (no words, too many, scores past
    float32), no unknown word, no zoom window, a walk small enough to draw, the text in the link."""
    return (problem(computed, MAX_TOKENS) is None and not any(computed.embedded.oov)
            and len(computed.embedded.tokens) <= min(STEPS_LIMIT, INTERACTIVE_LIMIT) and len(text) <= URL_TEXT_LIMIT)


def live_view(kv, vectors_name: str, raw: Request, computed, shown, config: Config, hidden: list[int]) -> None:
    """One head, no comparison: the browser computes the weights from the raw scores and redraws on its own; below
    it, what the server draws from the view (a score taken apart, the nearest words, positions, the walk)."""
    tokens, oov = computed.embedded.tokens, computed.embedded.oov
    palette = st.session_state.palette
    query = position(tokens, "query")
    st.session_state.query, st.session_state.hide = query, hidden
    sizes, opened = screen_sizes(), view_state(SCHEMA)
    data = heatmap_data(computed, opened, sizes)
    # A pause reruns the page only for a view drawn here from τ, hard, the mask or the query: else it costs the
    # server one small request (appkit/beacon), and the browser writes the link and builds the downloads. So does a
    # new sentence, while nothing drawn below depends on it.
    paused = server_views()
    alone = (not paused and config.positions == "none" and shown.view is not None
             and drawn_alone(computed, st.session_state.text))

    def redrawn(new, text: str) -> dict | None:  # off the script thread: what it reads of the session is taken now
        return heatmap_data(new, opened, sizes) if drawn_alone(new, text) else None

    interactive_heatmap(data, key="live", clean=clean_view, schema=None if paused else SCHEMA,
                        sentence=browser_sentence(kv, raw, redrawn) if alone else None)
    if shown.view is None:  # S/τ left float32's range: the heatmap says so, and there is nothing more to show
        save_url_state(SCHEMA)
        return
    view = shown.view
    st.caption("Everything above is computed in your browser from the raw scores: τ, hard, the mask, the colour scale "
               "and a click on a cell (or the arrow keys) redraw at once. Under the hide-keys mask, click a key's label "
               "to hide it. The buttons above the heatmap save what it draws (PNG, SVG, CSV, .npy); the link follows "
               "once you pause.")
    scores = computed.view.scores_block(0, slice(None), slice(None))  # (n, n)
    inside_a_score(view_parts(view), scores, view.mean_weights, view.allowed, tokens, oov, query,  # one head: its own
                   tau=config.temperature, hard=config.hard, schema=SCHEMA)
    nearest_to_mix(kv, vectors_name, view, query, config)
    positions_section(config, tokens, oov, position_width(view))
    step_walk(view, tokens, oov, palette, SCHEMA)
    save_url_state(SCHEMA)


def grid_view(kv, vectors_name: str, shown, config: Config, everything: Matrix) -> None:
    """Several heads: the server draws each head's weights in a grid (τ, hard and the mask are its widgets), then the
    query inspector, a score taken apart, positions and the walk."""
    tokens, oov, n = shown.embedded.tokens, shown.embedded.oov, len(shown.embedded.tokens)
    palette, scale = st.session_state.palette, st.session_state.scale
    why = problem(shown, MAX_TOKENS)
    if why:
        stop(why[0], SCHEMA, error=why[1])
    view = shown.view
    if view.blocked_rows:
        st.info(f"{len(view.blocked_rows)} query row(s) have every key masked, so their weights and output are all zero (no NaN).")

    chart(st, figures.head_grid(view.weights, tokens, scores=view.scores, oov=oov, palette=palette, scale=scale,
                                allowed=view.allowed), key="grid",
          matrix=everything)
    st.caption("The grid's downloads hold the average over heads; the step-by-step walk below has each head's.")

    # The query inspector is built before any of it is drawn, so the chart above reaches the browser on its own and
    # is drawn at once: Streamlit's frontend draws together whatever arrives within 10 ms of a first change.
    query = position(tokens, "query")
    row = view.mean_weights[query]
    top = BARS_LIMIT if n > BARS_LIMIT else None
    title = (f"Its {BARS_LIMIT} largest weights" if top else "Its weights over the keys") + (", head average" if config.heads > 1 else "")
    row_bars = figures.weight_bars(row, tokens, oov=oov, top=top, title=title)

    st.subheader("Query inspector")
    position_select(st, "Query word", tokens, "query")  # holds `query`
    bars, facts = st.columns([3, 2])
    chart(bars, row_bars, key="bars", matrix=Matrix(row[None].copy(), [tokens[query]], tokens))
    if top:
        bars.caption(f"The {BARS_LIMIT} largest weights of this query, in sentence order.")
    with facts:
        allowed = int(view.allowed[query].sum())
        st.metric("Entropy of the row (nats)", f"{view.entropy(query):.3f}",
                  help="0 means all weight on one key; ln(number of allowed keys) means spread evenly.")
        st.caption("Entropy measures how spread out the row is. Nats: entropy measured with the natural logarithm.")
        st.latex(r"H(\alpha_i) = -\sum_j \alpha_{ij} \ln \alpha_{ij} \le \ln %d = %.3f" % (max(allowed, 1), np.log(max(allowed, 1))))
        nearest_to_mix(kv, vectors_name, view, query, config)

    head = held("nhead", config.heads, clamp(0, config.heads - 1, 0),
                lambda **widget: st.selectbox("Head whose score is taken apart", list(range(config.heads)), **widget))
    inside_a_score(view_parts(view, head), view.scores[head], view.weights[head], view.allowed, tokens, oov, query,
                   tau=config.temperature, hard=config.hard, schema=SCHEMA)
    positions_section(config, tokens, oov, position_width(view))
    step_walk(view, tokens, oov, palette, SCHEMA)
    save_url_state(SCHEMA)



def position_width(view) -> int:
    """How wide the position encoding is: d_model for sinusoidal positions (added to X), a head's d_k for rotary."""
    return view.query.shape[-1] if view.config.positions == "rotary" else view.x.shape[1]


def compare_live(kv, vectors_name: str, raw: Request, request: Request) -> None:
    """Compare A | B in the browser (appkit/explorer.live_compare): each side's raw scores, A's view (its τ, hard,
    mask, hidden keys) and B's (b_temp, b_hard, b_mask), one colour scale, palette and query. Once the person pauses,
    the downloads of A, B and B − A, computed by the engine, hold what is drawn; then A's nearest words and walk."""
    state = st.session_state
    b_random = state.b_proj == "random"
    b_base = replace(raw.config, scoring=state.b_scoring, projection=state.b_proj, heads=state.b_heads if b_random else 1,
                     bias=state.bias and b_random, positions=state.b_pos)
    raw_b = replace(raw, sentence=state.b_text if state.b_text.strip() else raw.sentence, config=b_base)
    view = view_state(SCHEMA)
    view_b = {**view, "temp": state.b_temp, "hard": state.b_hard, "mask": state.b_mask, "hide": []}
    sides = live_compare(kv, raw, raw_b, (view, view_b), key="live_compare", clean=clean_view, taus=temperature_grid(),
                         bars_limit=BARS_LIMIT, **screen_sizes())
    request_b = replace(raw_b, config=replace(b_base, temperature=state.b_temp, hard=state.b_hard, mask=state.b_mask))
    shown = compare_downloads(kv, request, request_b, state.palette, state.scale) if sides else None
    if shown is None:  # a side cannot be drawn, or its S/τ left float32: it says so
        save_url_state(SCHEMA)
        return
    a = shown[0]
    st.caption("Both sides are computed in your browser from their raw scores, on one colour scale (per row is drawn as "
               "0 → the largest weight of either: per-row scaling would not compare). B − A: purple where B gives more "
               "weight, orange where A does, white where they agree. The link and the downloads follow once you pause.")
    nearest_to_mix(kv, vectors_name, a.view, min(state.query, len(a.embedded.tokens) - 1), request.config)
    step_walk(a.view, a.embedded.tokens, a.embedded.oov, state.palette, SCHEMA)
    save_url_state(SCHEMA)


def long_input(kv, vectors_name: str, computed, shown, config: Config, everything: Matrix) -> None:
    """A long input: the server's block overview of the weights on screen, and the zoom window drawn in the browser
    (its toolbar holds τ, hard, the masks, the colour scale and the query); the overview, the window's downloads and
    the nearest words follow once the person pauses. Where S/τ leaves float32 the window says so, and nothing else
    is drawn until τ changes."""
    tokens, oov = computed.embedded.tokens, computed.embedded.oov
    palette, scale = st.session_state.palette, st.session_state.scale
    if shown.view is not None:
        chart(st, figures.block_overview(shown.view.mean_weights, tokens, palette=palette, scale=scale), key="overview",
              matrix=everything)
        st.caption("The overview shows each block's largest weight, so no strong link disappears; its downloads hold "
                   "every weight. Below, any window at full resolution: it redraws at once, the overview once you pause.")
    rows, cols = zoom_window(computed.view, tokens, oov, clean=clean_view, view=view_state(SCHEMA), taus=temperature_grid(),
                             overflow=overflow_message(computed, "The scores divided by τ"), bars_limit=BARS_LIMIT,
                             **screen_sizes())
    if shown.view is None:
        save_url_state(SCHEMA)
        return
    view = shown.view
    weights = view.mean_weights[rows, cols].copy()  # (size, size) a copy: not the whole n×n
    scores = view.scores_block(0, rows, cols) if config.heads == 1 else None  # (size, size)
    downloads(st, "zoom", lambda: figures.attention_heatmap(
        weights, tokens[rows], tokens[cols], scores=scores, row_oov=oov[rows], col_oov=oov[cols], palette=palette, scale=scale,
        row_start=rows.start, col_start=cols.start, title=f"Zoom: queries {rows.start}–{rows.stop - 1} × keys {cols.start}–{cols.stop - 1}",
    ), Matrix(weights, tokens[rows], tokens[cols]), image_help="PNG or SVG: the buttons above the window.")
    st.caption("The window is computed in your browser from its rows' raw scores over every key: τ, hard, the mask, the "
               "colour scale and a click on a cell (or the arrow keys) redraw at once. Under the hide-keys mask, click a "
               "key's label to hide it. The overview, the link and the downloads follow once you pause.")
    nearest_to_mix(kv, vectors_name, view, st.session_state.query, config)
    step_walk(view, tokens, oov, palette, SCHEMA)
    save_url_state(SCHEMA)


def nearest_to_mix(kv, vectors_name: str, view, query: int, config: Config) -> None:
    """The words nearest to the chosen query's weighted mix of input vectors m_i = Σ_j α_ij x_j, on request (session
    state `near`): they depend on τ, hard, the mask and the query, so while shown each pause in the heatmap reruns
    the page."""
    if not st.toggle("Nearest words to the chosen query's mix of input vectors", key="near",
                     help=f"Searches all of {vectors_name}'s words for those closest to m_i = Σ_j α_ij x_j. While shown, "
                          "each pause in the heatmap asks the server for them again."):
        return
    neighbours = nearest_words(kv, view.mixture[query])
    st.write(f"Nearest words in {md_escape(vectors_name)} to the weighted mix of input vectors (query #{query}):")
    st.latex(r"m_i = \sum_j \alpha_{ij}\, x_j" + (r" = o_i" if config.projection == "identity" else ""))
    if neighbours:
        # A Markdown table, not st.dataframe: the landing page then needs neither pandas nor the grid's scripts.
        st.markdown("| word | cosine |\n|---|---|\n" + "\n".join(f"| {md_escape(w)} | {c:.3f} |" for w, c in neighbours))
    else:
        st.write("The mix is the zero vector (its row is fully masked or all its keys are zero), so it has no neighbours.")


attention(loaded, base, interactive)
