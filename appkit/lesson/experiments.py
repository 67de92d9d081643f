"""Lesson steps 17–20, what attention changes and what the model does with it: turning the copying head of step 16
off (with a head of the same layer as a control; attnviz.effects.head_off), the dog sentence's pieces ranked six ways
beside occlusion, the model writing, greedy and sampled, and a needle found in a long document. Each step is one
function of (text column, figure column)."""

import numpy as np

from attnviz import effects, figures, heads, models, needle
from attnviz.export import Matrix
from appkit.lesson.models import COPY_CUT, COPY_PIECES
from appkit.common import md_escape
from appkit.lesson.common import FIGURE_COLUMN, explore, held
from appkit.served import (example_document, example_needle_work, example_retrieval_scores, generation, importance_work,
                           induction, induction_work, model as loaded_model, probe_run, shared)
from attnviz.classroom import questions
from appkit.classroom import offer
from appkit.present import chart

DOG_PREFIX = "When he saw his owner, the dog was"  # the dog sentence (step 7's) up to its blank
CONTROL_SEED = 7


def off_runs(seed: int):
    """(SmolLM2, the copying head's layer and head, the control head, the probe's three runs: intact, without the
    copying head, without the control), each run shared by sessions (appkit.served)."""
    model = loaded_model("smollm2")
    scores, _ = induction("smollm2")
    layer, head = (int(v) for v in np.unravel_index(np.argmax(scores["induction"]), scores["induction"].shape))

    def control_of() -> int:
        intact = probe_run("smollm2", COPY_PIECES, 1000 + seed, False, COPY_CUT)[1]
        typed = effects.typed_heads(intact.weights[layer], intact.pieces.ids)
        return effects.control_head(head, model.heads, CONTROL_SEED + seed, typed)

    control = shared(("smollm2", "control head", seed, layer, head), control_of)
    runs = tuple(probe_run("smollm2", COPY_PIECES, 1000 + seed, False, COPY_CUT,
                           None if removed is None else effects.Ablation(((layer, removed),)))
                 for removed in (None, head, control))
    return model, layer, head, control, runs


def head_off_of(seed: int):
    """(SmolLM2, the copying head's layer and head, the control, what turning each off did), once for every session."""
    model, layer, head, control, runs = off_runs(seed)
    off = shared(("smollm2", "head off", seed),
                 lambda: effects.head_off(model, runs[0][0], tuple(run for _, run in runs), layer, head, control))
    return model, layer, head, control, off


def off_step(text, figure):
    text.write("Step 16 found a head that looks at the piece after an earlier copy. Does the model **need** it? Turn it "
               "off: its output αV is set to 0 before W_o, and the model runs on. As a control, turn off another head "
               "of the same layer, chosen at random among those with no known type on this sequence (none that looks "
               "at the previous piece, an earlier copy, the piece after one, or the first piece).")
    text.latex(r"\begin{gathered}\alpha V \to 0 \text{ in head } h \\ \Delta = \log p\,'(\text{repeat}) - "
               r"\log p(\text{repeat})\end{gathered}")
    seed = text.selectbox("Random sequence", list(range(10)), key="copyseed", format_func=lambda s: f"seed {s}")
    try:
        if induction_work("smollm2").ready(figure) is None:
            return
        model, layer, head, control, off = head_off_of(seed)
    except (models.ModelError, heads.HeadsError) as error:
        text.info(str(error))
        return
    if off.repeat is None:
        text.info("This sequence's last piece has no piece after its first copy; pick another seed.")
        return
    names = ["the model", f"without layer {layer + 1}, head {head + 1}", f"without layer {layer + 1}, head {control + 1} (control)"]
    values = off.p
    offer(questions.head_off(values))
    if held(text, "result") | held(figure):
        return
    repeat = model.reader.labels([off.repeat])[0]
    chart(figure, figures.weight_bars(values, names, title=f"p(the repeat “{repeat}”) after the last piece",
                                      axis="probability", whole=True),
          key="lesson_off", matrix=Matrix(values[None].copy(), ["p(repeat)"], names, corner="\\ run"))
    (clean_hits, total), (off_hits, _), (control_hits, _) = off.hits
    text.write(f"With every head, the model gives the repeat “{repeat}” p = {values[0]:.2f} and predicts the repeat "
               f"at {clean_hits} of {total} positions of the second copy. Without layer {layer + 1}, head {head + 1}: "
               f"p = {values[1]:.2f}, and {off_hits} of {total}. Without the control, head {control + 1}: "
               f"p = {values[2]:.2f}, and {control_hits} of {total}."
               + (" Turning the induction head off hurts copying far more than the control: the weights pointed at "
                  "a head the prediction needs." if values[1] < values[2] else
                  " Here the control hurts as much: other heads carry the copy too, so the weights alone did not say "
                  "what the prediction needs."))
    text.caption("Both runs go through attnviz.effects.ablate's seam in the engine: the head's output is set to 0 "
                 "before W_o in its layer, every other number is the model's own.")
    with text:
        explore("decoder", "Decoder", "Every head's effect", {"text": DOG_PREFIX, "effects": 1, "layer": layer + 1,
                                                              "head": head + 1})


def importance_step(text, figure):
    text.write("A weight says where a head looks. Does the prediction depend on what it looks at? Take the dog "
               "sentence of step 7 up to its blank and rank its pieces six ways; then **knock each piece out**: block every "
               "edge into it from the other pieces, in every layer, and measure how far log p of the model's next "
               "piece moves. That is occlusion, the ground truth here.")
    text.latex(r"\begin{gathered}o_j = |\log p(t) - \log p(t \mid \text{no } {\to}\, j)| \\ "
               r"\rho = \text{Spearman}(\text{measure}, o)\end{gathered}")
    try:
        found = importance_work("smollm2", DOG_PREFIX).ready(figure)
    except (models.ModelError, effects.EffectsError) as error:
        text.info(str(error))
        return
    if found is None:
        return
    names = {k: v.split(" (")[0].split(" ‖")[0] for k, v in effects.MEASURES.items()}
    offer(questions.importance(found.agreement, names))
    if held(text, "result") | held(figure):
        return
    rows = {k: f"{names[k]} (ρ {'—' if r is None else f'{r:.2f}'})" for k, r in found.agreement.items()}
    data, drawn = figures.importance_data(found.measures, rows, found.tokens,
                                          title=f"Each piece's importance to the next piece “{found.target}”")
    chart(figure, figures.matrix_heatmap(drawn, list(rows.values()), found.tokens, width=FIGURE_COLUMN, height=420, whole_rows=True,
                                         title=f"Importance to “{found.target}”, each row ÷ its largest |value|"),
          key="lesson_importance",
          matrix=Matrix(np.stack(list(found.measures.values())), list(found.measures), found.tokens,
                        corner="measure \\ piece"))
    text.write(found.sentence())
    text.caption("ρ is taken over every piece but the last, which nothing after it reads. Raw attention is the last "
                 "layer's weights averaged over heads; rollout multiplies every layer's; value-weighted scales each "
                 "weight by the norm of what it moves; contributions follow LM-TT's routes; gradient × input is a "
                 "first-order guess; the uniform baseline is rollout with equal weights: what position alone gives.")
    with text:
        explore("decoder", "Decoder", "Is attention the explanation?", {"text": DOG_PREFIX, "effects": 1})


WRITE_STEPS = 12
SAMPLER = dict(temperature=1.0, top_k=50, top_p=0.95)


def parting(greedy, sampled) -> int | None:
    """The first step at which two generations from one prompt choose different pieces, or None."""
    return next((k for k, (a, b) in enumerate(zip(greedy.new_ids, sampled.new_ids)) if a != b), None)


def writings(seed: int):
    """(SmolLM2, its greedy writing after the dog sentence, its sampled one with `seed`), shared by sessions."""
    greedy = generation("smollm2", DOG_PREFIX, WRITE_STEPS, 0.0, 0, 1.0, 0)
    return loaded_model("smollm2"), greedy, generation("smollm2", DOG_PREFIX, WRITE_STEPS, seed=seed, **SAMPLER)


def write_step(text, figure):
    text.write(f"Let the model write {WRITE_STEPS} pieces after the dog sentence, twice. **Greedy** takes the most "
               "likely piece at every step. **Sampled** draws each piece from the distribution, with T = 1 and the "
               "50 most likely pieces whose mass reaches 0.95 kept. Each new piece is one more query row per head, "
               "computed from the K/V cache of the pieces before it.")
    text.latex(r"\begin{gathered}\text{greedy: } t = \arg\max_i p_i \\ \text{sampled: } t \sim p "
               r"\text{ over the kept pieces}\end{gathered}")
    seed = text.selectbox("Sampler's seed", list(range(10)), key="writeseed", format_func=lambda s: f"seed {s}")
    try:
        model, greedy, sampled = writings(seed)
    except models.ModelError as error:
        text.info(str(error))
        return
    said = {name: model.tokenizer.decode(g.new_ids) for name, g in (("greedy", greedy), ("sampled", sampled))}
    offer(questions.write(greedy.new_ids, sampled.new_ids))
    if held(text, "result") | held(figure):
        return
    text.markdown(f"Greedy: {DOG_PREFIX} **{md_escape(said['greedy'].strip())}**  \nSampled (seed {seed}): "
                  f"{DOG_PREFIX} **{md_escape(said['sampled'].strip())}**")
    k = parting(greedy, sampled)
    if k is None:
        text.write(f"With seed {seed} the sampler drew the greedy piece at every step: at each one the most likely "
                   "piece held most of the kept mass. Pick another seed.")
        return
    step = sampled.steps[k]
    offered = [int(i) for i in step.offered]
    names = model.reader.labels(offered)
    values = step.probs.astype(np.float32)
    labels = [f"{name} (greedy)" if i == greedy.new_ids[k] else f"{name} (sampled)" if i == step.chosen else name
              for name, i in zip(names, offered)]
    chart(figure, figures.weight_bars(values, labels, title=f"Step {k + 1}: what the model offered (T = 1)",
                                      axis="probability"),
          key="lesson_write", matrix=Matrix(values[None].copy(), [f"step {k + 1}"], names, corner="step \\ piece"))
    chosen, best = model.reader.labels([step.chosen, greedy.new_ids[k]])
    rank = offered.index(step.chosen) + 1 if step.chosen in offered else None
    where = f"the {ordinal(rank)} most likely" if rank else f"one of the {len(step.kept)} kept, below the bars"
    before = ("up to then both had written the same pieces, so the model offered both the same distribution" if k else
              "from the same prompt the model offered both the same distribution")
    text.write(f"The two part at step {k + 1}: {before}. Greedy took “{best}” (p = {values[0]:.2f}); the sampler drew “{chosen}”, {where} "
               f"(p = {step.p_chosen:.2f}). From there each reads a different text, so the offers that follow differ too: "
               "a sampled text is one draw of many, and greedy is the single most likely path piece by piece, not "
               "the most likely text.")
    with text:
        explore("decoder", "Decoder", "Watch it write", {"text": DOG_PREFIX, "write": WRITE_STEPS, "seed": seed,
                                                         "t": SAMPLER["temperature"], "topk": SAMPLER["top_k"],
                                                         "topp": SAMPLER["top_p"]})


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


NEEDLE_HEADS = 8  # the heads the step's bars name


# bench/bench_needle.py's grid (docs/benchmarks.md, "A needle in a haystack"): keys back of 15 documents
NEEDLE_TRIALS = {"documents": 15, "intact": 12, "strongest": 0, "random": 15}


def trials_sentence(trials: dict = NEEDLE_TRIALS) -> str:
    """What the benchmark's grid found, each count with its 95 % interval (as the Long text page gives them), and what
    the intervals can and cannot tell apart, turning random heads off included."""
    total = trials["documents"]
    bounds = {name: needle.share_interval(trials[name], total) for name in ("intact", "strongest", "random")}
    overlap = lambda a, b: bounds[a][0] <= bounds[b][1] and bounds[b][0] <= bounds[a][1]  # noqa: E731

    def count(name: str) -> str:
        low, high = bounds[name]
        return f"{trials[name]} of {total} (a share anywhere from {low:.0%} to {high:.0%}, 95 % interval)"

    said = (f"Measured on {total} documents of 1,000 to 4,000 pieces, the key came back in {count('intact')}; with "
            f"the 8 strongest retrieval heads turned off, in {count('strongest')}; with 8 random heads of the same "
            f"layers turned off, in {count('random')}. ")
    said += ("The first two intervals overlap: so few documents cannot show that the strongest heads matter. "
             if overlap("intact", "strongest") else
             "The first two intervals do not overlap: the strongest heads are what finds the key. ")
    if trials["random"] > trials["intact"]:
        said += ("Turning random heads off did better than the model intact"
                 + (", but their intervals overlap: so few documents cannot tell them apart. "
                    if overlap("intact", "random") else ". "))
        said += ("Turning heads off can change an answer by chance: the keys the intact model missed had the needle "
                 "right before the question, where it went on with the needle's own sentence (“the pass key. The pass "
                 "key is the”); without the random heads it copied the key there too, so one of them may have pulled "
                 "it along the sentence.")
    return said


def needle_step(text, figure):
    try:
        found = example_needle_work("smollm2").ready(figure)
        if found is None:
            return
        model, stack = loaded_model("smollm2"), example_document("smollm2")
        written, events, copied = found
    except models.ModelError as error:
        text.info(str(error))
        return
    n, where = len(stack.pieces), stack.needle  # where: the needle's pieces
    text.write(f"A long document of {n} pieces hides one fact: filler that says nothing (“The grass is green. The sky "
               f"is blue. …”), with “The pass key is {stack.key}. Remember it.” halfway, and at the end “What is the "
               f"pass key? The pass key is”. More than the {model.max_pieces} pieces a run of the other pages reads: the "
               "document goes into the K/V cache one block of queries at a time, and the model writes from there.")
    scores = example_retrieval_scores("smollm2")  # (L, H) this document's retrievals over the pieces copied
    offer(questions.needle(events))
    if held(text, "result") | held(figure):
        return
    text.markdown(f"SmolLM2 writes: **{md_escape(written.text.strip())}**")
    strongest = needle.strongest_heads(scores, NEEDLE_HEADS)
    values = np.array([scores[l, h] for l, h in strongest], np.float32)
    labels = [f"layer {l + 1}, head {h + 1}" for l, h in strongest]
    chart(figure, figures.weight_bars(values, labels, title=f"Retrieval score on this document: {NEEDLE_HEADS} strongest heads",
                                      axis="retrievals / needle pieces copied", whole=True),
          key="lesson_needle", matrix=Matrix(values[None].copy(), ["score"], labels, corner="score \\ head"))
    text.latex(r"\begin{gathered}\text{score}(h) = R_h / C \\ j^*_t = \arg\max_j \alpha_h[t, j] \\ "
               r"R_h = \#\{t: j^*_t \in \text{needle},\ x_{j^*_t} = t\} \\ "
               r"C = \#\{t \text{ copied from the needle}\}\end{gathered}")
    retrieving = int((events > 0).sum())
    (l, h), best = strongest[0], float(values[0])
    text.write(f"While it copied {copied} pieces of the needle, {retrieving} of its {events.size} heads looked, at least "
               f"once, straight at the very piece being copied, inside the needle (Wu et al., 2024, call them retrieval "
               f"heads); layer {l + 1}, head {h + 1} did so for {best:.0%} of them. The needle is {len(where)} of the "
               f"{n} pieces. " + trials_sentence())
    with text:
        explore("long_text", "Long text", "Find a needle", {"layer": l + 1, "head": h + 1})
