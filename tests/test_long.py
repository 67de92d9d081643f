"""attnviz.needle: pass-key documents read into the K/V cache block by block, the answer written greedily, and Wu et al.'s
retrieval heads. What is written and each written piece's query row of weights are checked against transformers'
generate and eager attentions on the same weights (a tiny GPT-2, a tiny Mistral with grouped key/value heads and a
sliding window), with and without heads removed (transformers with a pre-hook on the output projection); the retrieval
events against their definition written out, on a planted copy. SmolLM2 finding the key, and its heads' scores against
transformers' attentions: the lesson's step 20 (tests/test_page_lesson.py)."""

import html
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: no hub access, ever

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402
from test_scan import build  # noqa: E402

from attnviz import models  # noqa: E402
from attnviz import needle as lab  # noqa: E402  (the tests name their needles `needle`)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("needle")
    return {family: build(family, root) for family in ("gpt2", "mistral", "bert")}


def transformers_reading(folder: Path, ids: list[int], steps: int, heads_off=()):
    """transformers' greedy pieces after `ids`, and its eager attentions (L, H, m, m) over ids and those pieces, with
    `heads_off` [(layer, head)] removed by a pre-hook on each layer's output projection (their slice of its input set
    to 0)."""
    import transformers as T

    module = T.AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    config = module.config
    dh = config.hidden_size // config.num_attention_heads
    for layer, head in heads_off:
        block = module.transformer.h[layer].attn.c_proj if config.model_type == "gpt2" else module.model.layers[layer].self_attn.o_proj

        def zero(_, args, head=head):
            x = args[0].clone()  # (1, m, H·dh)
            x[..., head * dh:(head + 1) * dh] = 0
            return (x,)
        block.register_forward_pre_hook(zero)
    with torch.no_grad():
        made = module.generate(torch.tensor([ids]), max_new_tokens=steps, do_sample=False, num_beams=1,
                               pad_token_id=0)[0, len(ids):].tolist()
        out = module(torch.tensor([ids + made]), output_attentions=True)
    return made, torch.stack(out.attentions)[:, 0].double().numpy()


@pytest.mark.parametrize("family, heads_off", [("gpt2", ()), ("mistral", ()), ("mistral", ((0, 3), (1, 5), (1, 6)))])
def test_the_pieces_written_and_each_query_row_equal_transformers(folders, family, heads_off):
    model = models.load(folders[family], device="cpu")
    stack = lab.haystack(model, 900, 0.5, "48213")
    n = len(stack.pieces)
    assert 850 < n <= 900 > model.max_pieces  # past what a run reads
    seen = []
    written = lab.write(model, stack.pieces, 6, heads_off, progress=lambda done, total: seen.append((done, total)))
    made, expected = transformers_reading(folders[family], stack.pieces.ids, 6, heads_off)
    assert written.ids == made[:len(written.ids)] and len(written.ids) >= 1
    assert seen == [(i, model.layers) for i in range(1, model.layers + 1)]
    for t, row in enumerate(written.rows):  # the query that chose piece t sits at n − 1 + t
        assert row.shape == (model.layers, model.heads, n + t)
        assert np.abs(row - expected[:, :, n - 1 + t, :n + t]).max() <= 1e-5, t
    if family == "mistral":  # the window: nothing 300 or more pieces back
        assert (written.rows[0][..., : n - 300] == 0).all()


def test_the_haystack_holds_its_needle_where_asked_and_fits_its_length(folders):
    model = models.load(folders["mistral"], device="cpu")
    for depth in (0.0, 0.5, 1.0):
        stack = lab.haystack(model, 600, depth, "70315")
        text = stack.pieces.text
        needle = "".join(text[a:b] for a, b in stack.pieces.spans[stack.needle.start:stack.needle.stop])
        assert needle.replace(" ", "") == lab.NEEDLE.format(key="70315").replace(" ", "")
        assert len(stack.pieces) <= 600 and len(lab.haystack(model, 700, depth, "70315").pieces) > 600
        assert text.startswith(lab.INTRO) and text.endswith(lab.QUESTION)
        before, after = text.split(lab.NEEDLE.format(key="70315"))
        sentences = before.count(lab.FILLER), after.count(lab.FILLER)  # the filler's sentences on either side
        assert sum(sentences) > 3 and round(depth * sum(sentences)) == sentences[0]


def retrievals_written_out(ids, needle, written, rows):
    """Wu et al.'s definition, one head at a time: a head retrieves at a step when the piece written there is a piece
    of the needle, and its strongest key lies inside the needle and holds that same piece."""
    layers, heads = rows[0].shape[:2]
    events = np.zeros((layers, heads), int)
    copied = 0
    for step, token in enumerate(written):
        if token not in [ids[i] for i in needle]:
            continue
        copied += 1
        for layer in range(layers):
            for head in range(heads):
                key = int(np.argmax(rows[step][layer, head]))
                if needle.start <= key < needle.stop and ids[key] == token:
                    events[layer, head] += 1
    return events, copied


def test_retrieval_events_follow_their_definition_on_a_planted_copy():
    rng = np.random.default_rng(3)
    ids = list(rng.integers(100, 200, 60))
    needle = range(20, 26)
    ids[20:26] = [7, 8, 9, 7, 5, 6]  # the key's pieces; 7 is also outside the needle
    ids[40] = 8
    written = [7, 8, 9, 300, 5]  # the copy, with a piece that is not the needle's
    rows = [rng.random((3, 4, 60 + t)) * 0.1 for t in range(len(written))]  # (L, H, k) weak everywhere
    for row in rows:
        row[..., 0] = 0.5  # unless planted, each head's strongest key is the first piece

    def plant(step, layer, head, key):
        rows[step][layer, head, key] = 1.0

    plant(0, 0, 0, 20)  # retrieves 7 from the needle
    plant(0, 0, 1, 23)  # 7 again, its second place in the needle: retrieves too
    plant(0, 1, 0, 21)  # inside the needle, but another piece: no
    plant(1, 0, 0, 21)  # retrieves 8
    plant(1, 2, 3, 40)  # 8, but outside the needle: no
    plant(3, 0, 0, 22)  # the piece written is not the needle's: not counted
    plant(4, 0, 0, 24)  # retrieves 5
    plant(4, 2, 2, 63)  # a piece written earlier: no
    events, copied = lab.retrievals(ids, needle, written, rows)
    expected, expected_copied = retrievals_written_out(ids, needle, written, rows)
    assert np.array_equal(events, expected) and copied == expected_copied
    assert copied == 4 and events[0, 0] == 3 and events[0, 1] == 1 and events[1, 0] == 0 and events[2, 3] == 0
    assert events.sum() == 4


def test_the_grid_its_scores_and_an_ablation(folders):
    model = models.load(folders["mistral"], device="cpu")
    seen = []
    grid = lab.needle(model, lengths=[200, 400], depths=[0, 1], seed=5, progress=lambda d, t: seen.append((d, t)))
    assert grid.found.shape == grid.copied.shape == (2, 2) and grid.retrievals.shape == (2, 2, 2, 8)
    assert all(len(k) == 5 and k.isdigit() for row in grid.keys for k in row)
    assert grid.keys == lab.needle(model, lengths=[200, 400], depths=[0, 1], seed=5).keys  # seeded
    assert (grid.pieces <= np.array([[200], [400]])).all() and (grid.pieces > np.array([[150], [350]])).all()
    assert np.array_equal(grid.found, [[k in a for k, a in zip(keys, answers)] for keys, answers in zip(grid.keys, grid.answers)])
    assert seen[-1] == (8, 8) and len(seen) == 8
    from attnviz.figures.long import needle_grid  # the grid's hover names each document and what the model wrote

    shown = needle_grid(grid, "Keys back").data[0]
    for a, b in np.ndindex(grid.found.shape):
        hover = shown.text[a][b]
        assert f"key {grid.keys[a][b]}: {'found' if grid.found[a, b] else 'not found'}" in hover
        assert html.escape(grid.answers[a][b].strip()[:80]) in hover and "<script" not in hover
    assert shown.hovertemplate == "%{text}<extra></extra>"
    # scores: retrievals over copies, averaged over the documents where any piece was copied
    grid.retrievals[:] = 0
    grid.copied[:] = [[4, 0], [2, 5]]
    grid.retrievals[0, 0, 1, 6], grid.retrievals[1, 0, 1, 6], grid.retrievals[1, 1, 0, 2] = 4, 1, 5
    expected = np.zeros((2, 8))
    expected[1, 6], expected[0, 2] = (4 / 4 + 1 / 2 + 0 / 5) / 3, (5 / 5) / 3
    assert np.allclose(grid.scores, expected)
    assert grid.strongest(2) == ((1, 6), (0, 2))
    off = lab.without_retrieval_heads(model, k=2, lengths=[200], depths=[0.5], before=grid)
    assert off.strongest.heads_off == ((1, 6), (0, 2))
    assert [l for l, _ in off.random.heads_off] == [1, 0] and not set(off.random.heads_off) & {(1, 6), (0, 2)}


def test_bad_input_gets_a_message(folders, tmp_path):
    model = models.load(folders["mistral"], device="cpu")
    for bad in ({"lengths": [10]}, {"lengths": [5000]}, {"lengths": [True]}, {"depths": [1.5]}, {"depths": ["x"]},
                {"lengths": []}, {"lengths": list(range(100, 1000, 10)), "depths": [0, 1]}):
        with pytest.raises(ValueError):
            lab.needle(model, **{"lengths": [200], "depths": [0.5], **bad})
    with pytest.raises(ValueError, match="is not in"):
        lab.needle(model, lengths=[200], depths=[0.5], heads_off=[(2, 0)])
    bert = models.load(folders["bert"], device="cpu")
    with pytest.raises(models.ModelError, match="written by a decoder"):
        lab.needle(bert, lengths=[200], depths=[0.5])
    t5 = models.load(tiny_models.build("t5", tmp_path), device="cpu")
    with pytest.raises(models.ModelError, match="computed by transformers"):
        lab.needle(t5, lengths=[200], depths=[0.5])
    with pytest.raises(models.ModelError, match="reads at most 1,100 pieces"):
        lab.write(model, lab.haystack(model, 1090, 0.5, "12345").pieces, 20)


def test_an_upload_is_read_as_utf8_or_utf16_with_its_mark_and_refused_with_a_reason_otherwise():
    from attnviz.models import read_text

    text = "The pass key is 48213. Ünïcode — 你好"
    for data in (text.encode("utf-8"), text.encode("utf-8-sig"), text.encode("utf-16"), text.encode("utf-16-be")
                 .join([b"\xfe\xff", b""])):
        assert read_text(data) == text
    with pytest.raises(ValueError, match="zero bytes"):
        read_text(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(ValueError, match="UTF-16 text but cannot be read"):
        read_text(b"\xff\xfe\x00\xd8")  # a lone surrogate
    with pytest.raises(ValueError, match="not UTF-8"):
        read_text(b"caf\xe9")


def test_a_shares_interval_is_wilsons():
    low, high = lab.share_interval(4, 6)
    p, n, z = 4 / 6, 6, 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (low, high) == pytest.approx((centre - half, centre + half)) and 0.29 < low < 0.31 and 0.90 < high < 0.91
    assert lab.share_interval(0, 6)[0] == 0 and lab.share_interval(6, 6)[1] == pytest.approx(1)
    assert lab.share_interval(0, 0) == (0, 1)


def test_the_old_name_still_works_and_says_where_each_name_moved():
    import importlib

    from attnviz.models import pieces

    old = importlib.import_module("attnviz.long")
    with pytest.warns(DeprecationWarning, match="use attnviz.needle.needle"):
        assert old.needle is lab.needle
    with pytest.warns(DeprecationWarning, match="use attnviz.models.pieces.read_text"):
        assert old.read_text is pieces.read_text
    with pytest.raises(AttributeError):
        old.no_such_name


@pytest.mark.parametrize("family, heads_off", [("gpt2", ()), ("mistral", ((0, 3), (1, 5)))])
def test_pieces_fed_in_one_step_write_what_greedy_steps_write(folders, family, heads_off, monkeypatch):
    """Each step feeds the piece written and the pieces looked up after it (_guess), kept while the row before each
    chose it. Whatever the lookup offers (all of the answer, its start only, a wrong piece first, more than the steps
    left), the pieces written and each one's row of weights are greedy steps' and transformers'; the whole answer
    offered takes two steps, not six."""
    from tolerance import assert_close_rounding

    model = models.load(folders[family], device="cpu")
    stack = lab.haystack(model, 900, 0.5, "48213")
    n, vocab = len(stack.pieces), model.weights.embeddings.shape[0]
    made, expected = transformers_reading(folders[family], stack.pieces.ids, 6, heads_off)
    monkeypatch.setattr(lab, "_lookup", lambda ids: [])
    [(alone, _)] = lab._write(model, stack.pieces, 6, [heads_off])
    assert alone.ids == made[:len(alone.ids)] and len(alone.ids) == 6  # no end piece: every step is taken
    other = lambda piece: (piece + 1) % vocab  # noqa: E731
    drafts = [alone.ids, alone.ids[:2] + [other(alone.ids[2])] + alone.ids[3:], [other(alone.ids[0])] + alone.ids[1:],
              alone.ids[:3], alone.ids + [1, 2, 3]]
    steps_taken = []
    real_logits = lab.engine.logits
    monkeypatch.setattr(lab.engine, "logits", lambda *a: steps_taken.append(1) or real_logits(*a))
    for draft in drafts:
        def offered(ids, draft=draft):  # the draft's pieces after those written, where they agree with it
            written = ids[n:]
            return draft[len(written):] if draft[:len(written)] == written else []
        monkeypatch.setattr(lab, "_lookup", offered)
        for steps in (1, 3, 6):
            steps_taken.clear()
            [(written, _)] = lab._write(model, stack.pieces, steps, [heads_off])
            assert written.ids == alone.ids[:steps], (draft, steps)
            assert len(written.rows) == steps
            for t, row in enumerate(written.rows):
                assert row.shape == (model.layers, model.heads, n + t)
                assert_close_rounding(row, alone.rows[t], n, model.layers)
                assert np.abs(row - expected[:, :, n - 1 + t, :n + t]).max() <= 1e-5, t
            if draft is drafts[0] and steps == 6:
                assert len(steps_taken) == 2  # the document's logits, then five pieces fed at once


def test_the_pieces_to_feed_are_those_that_followed_the_same_words_latest():
    """Prompt lookup: the pieces after the latest earlier place of the last three pieces (or two, or one), at most
    those greedy steps would feed: no end piece, not the last step's."""
    key = [9, 1, 2, 3]  # "The pass key is" 1 2 3
    text = [7, 9, 1, 2, 5, 6] + key + [4, 4, 7, 9, 1, 2]  # … and the question "The pass key is"
    assert lab._lookup(text) == [3, 4, 4, 7, 9, 1, 2]  # the latest place of [9, 1, 2] is the needle's, not the first
    assert lab._lookup([1, 2, 3, 8, 3]) == [8, 3]  # one piece matched where no two are
    assert lab._lookup([1, 2, 3]) == [] and lab._lookup([5]) == []
    assert lab._guess(text[:-1], [2], 4, set()) == [3, 4]  # the answer's pieces, written and fed: steps − 1 − 1
    assert lab._guess(text[:-1], [2], 10, {4}) == [3]  # stops before an end piece
    assert lab._guess(text[:-1], [2], 1, set()) == []


@pytest.mark.parametrize("family, heads_off, read_on", [("gpt2", (), 512), ("mistral", (), 100),
                                                         ("mistral", ((0, 3), (1, 5)), 100)])
def test_a_document_read_on_from_a_shared_filler_equals_it_read_whole(folders, family, heads_off, read_on, monkeypatch):
    """A document whose filler another document already read (the grid's sharing): its K/V caches, the last query's
    row of weights in every layer and what it writes equal the document read whole, within float32's rounding of sums
    of n terms through L layers (tolerance.py), under a window and heads removed too, in one step or several."""
    from tolerance import assert_close_rounding

    monkeypatch.setattr(lab, "READ_ON", read_on)
    model = models.load(folders[family], device="cpu")
    first = lab.haystack(model, 900, 1.0, "31415")
    [(_, whole)] = lab._write(model, first.pieces, 4, [heads_off])
    filler = whole.cut(first.needle.start)
    second = lab.haystack(model, 700, 0.5, "27182")
    shared = filler.shared(second.pieces.ids)
    assert shared >= second.needle.start > lab.BLOCK  # everything before its needle is the first one's filler
    [(on, on_read)] = lab._write(model, second.pieces, 6, [heads_off], prefixes=[filler])
    [(alone, alone_read)] = lab._write(model, second.pieces, 6, [heads_off])
    assert on.ids == alone.ids and on.text == alone.text
    n, layers = len(second.pieces), model.layers
    for (key, value), (their_key, their_value) in zip(on_read.caches, alone_read.caches):
        assert_close_rounding(key.numpy(), their_key.numpy(), n, layers)
        assert_close_rounding(value.numpy(), their_value.numpy(), n, layers)
    for row, theirs in zip(on.rows, alone.rows):
        assert_close_rounding(row, theirs, n, layers)


def test_the_grid_shares_its_filler_and_counts_what_it_read(folders):
    model = models.load(folders["mistral"], device="cpu")
    """The deepest needle of the longest document is read first; each other document reads on from the filler before
    its own needle (about half a document at depth 0.5, nearly all at depth 1), with the same answers."""
    shared = lab.needle(model, lengths=[400, 600], depths=[0.5, 1], seed=2)
    whole = lab.needle(model, lengths=[400, 600], depths=[0.5, 1], seed=2, share_filler=False)
    assert whole.read == whole.pieces.sum() and shared.read < 0.65 * whole.read, (shared.read, whole.read)
    assert shared.answers == whole.answers and np.array_equal(shared.found, whole.found)
    assert np.array_equal(shared.retrievals, whole.retrievals) and np.array_equal(shared.copied, whole.copied)


@pytest.mark.parametrize("read_on", [False, True])
def test_sets_of_heads_removed_in_one_reading_equal_each_set_removed_alone(folders, read_on):
    """The page's "Turn off" removes two sets of heads in one reading of each document (needle.grids): the layers below
    the first one either set changes are computed once. Each set's written pieces, rows of weights and K/V caches are
    bit for bit those of the set removed alone, read whole or on from the filler, and the progress counts the shared
    layer once and the other once a set."""
    model = models.load(folders["mistral"], device="cpu")
    removals = [(), ((1, 3),), ((1, 5), (1, 6))]
    assert lab.first_changed(model.layers, removals) == 1 == model.layers - 1
    document = lab.haystack(model, 700, 0.5, "27182")
    fillers = None
    if read_on:
        first = lab.haystack(model, 900, 1.0, "31415")
        fillers = [whole.cut(first.needle.start) for _, whole in lab._write(model, first.pieces, 4, removals)]
    heard = []
    together = lab._write(model, document.pieces, 6, removals, lambda done, total: heard.append((done, total)),
                          prefixes=fillers)
    assert heard[-1] == (4, 4) and [done for done, _ in heard] == sorted({done for done, _ in heard})
    for (written, read), heads, filler in zip(together, removals, fillers or [None] * 3):
        [(alone, alone_read)] = lab._write(model, document.pieces, 6, [heads],
                                           prefixes=None if filler is None else [filler])
        assert written.ids == alone.ids and len(written.rows) == len(alone.rows)
        for row, theirs in zip(written.rows, alone.rows):
            np.testing.assert_array_equal(row, theirs)
        for (key, value), (their_key, their_value) in zip(read.caches, alone_read.caches):
            assert torch.equal(key, their_key) and torch.equal(value, their_value)
    interventions = [None] + [lab.Ablation(heads) for heads in removals[1:]]
    with torch.inference_mode():
        below = lab._read_below(model, document.pieces, 1, lab._Counter(None, 4))
        outputs = [lab._read_above(model, below, each, 1, lab._Counter(None, 4))[2] for each in interventions]
    assert not torch.allclose(outputs[0], outputs[1]) and not torch.allclose(outputs[1], outputs[2])  # the sets differ


def test_turning_heads_off_reads_the_documents_once_for_both_sets(folders):
    model = models.load(folders["mistral"], device="cpu")
    before = lab.needle(model, lengths=[400, 600], depths=[0.5, 1], seed=2)
    heard = []
    off = lab.without_retrieval_heads(model, 2, before=before, seed=2, progress=lambda *a: heard.append(a))
    for grid in (off.strongest, off.random):
        alone = lab.needle(model, lengths=[400, 600], depths=[0.5, 1], seed=2, heads_off=grid.heads_off)
        assert grid.answers == alone.answers and np.array_equal(grid.found, alone.found)
        assert np.array_equal(grid.retrievals, alone.retrievals) and np.array_equal(grid.copied, alone.copied)
    split = lab.first_changed(model.layers, [off.strongest.heads_off, off.random.heads_off])
    assert heard[-1] == (4 * (split + 2 * (model.layers - split)),) * 2


def test_reading_on_keeps_each_layers_last_row_and_not_the_steps_weights(folders, monkeypatch):
    """A document read on from a filler keeps each layer's last query row (H, n). A view of it would hold that step's
    whole weights (H × READ_ON × n) in every layer: over 2 GiB at SmolLM2's 4,000 pieces (docs/benchmarks.md)."""
    monkeypatch.setattr(lab, "READ_ON", 100)
    model = models.load(folders["mistral"], device="cpu")
    first = lab.haystack(model, 900, 1.0, "31415")
    [(_, filler)] = lab._write(model, first.pieces, 2, [()], keep=first.needle.start)
    assert len(filler.ids) == first.needle.start
    document = lab.haystack(model, 700, 0.5, "27182")
    shared = filler.shared(document.pieces.ids)
    with torch.inference_mode():
        below = lab._read_on_below(model, document.pieces, filler.cut(shared), 1, lab._Counter(None, 2))
        _, last, _ = lab._read_on_above(model, below, filler.cut(shared), None, 1, lab._Counter(None, 2))
    assert len(last) == model.layers
    for row in last:
        assert row.shape == (model.heads, len(document.pieces))
        assert row.untyped_storage().nbytes() == row.numel() * row.element_size()


def own_text(rng, key: str, words: int = 420) -> str:
    """A text no other test names: a garden diary of seeded random sentences, a code word in its middle, a question at
    its end."""
    things = ["the tomatoes", "a robin", "the old gate", "my neighbour", "the rain barrel", "the beans", "a fox"]
    doings = ["looked tired", "came back early", "was painted blue", "needed water", "kept us busy", "made a noise"]
    sentences = [f"{things[rng.integers(len(things))].capitalize()} {doings[rng.integers(len(doings))]} today."
                 for _ in range(words // 5)]
    sentences.insert(len(sentences) // 2, f"The code for the shed is {key}.")
    return " ".join(sentences) + " What is the code for the shed? The code for the shed is"


@pytest.mark.parametrize("family", ["gpt2", "mistral"])
def test_asking_ones_own_text_writes_what_transformers_writes_and_finds_where_each_piece_came_from(folders, family):
    """needle.ask on a text of one's own: the answer and the answers without the given heads and without as many
    random heads of their layers are transformers' greedy pieces under the same heads removed, and each written piece's
    source is the text's piece equal to it that the most heads of transformers' eager attentions had as their
    strongest key, written out here head by head."""
    model = models.load(folders[family], device="cpu")
    text = own_text(np.random.default_rng(11), "90714", words=150)  # about 800 of the tiny tokenizer's pieces
    retrieval = ((0, 1), (1, 2))
    seen = []
    asked = lab.ask(model, text, steps=6, retrieval=retrieval, progress=lambda done, total: seen.append((done, total)))
    ids = asked.pieces.ids
    made, attentions = transformers_reading(folders[family], ids, 6)
    assert asked.written.ids == made[:len(asked.written.ids)]
    assert asked.removed["strongest"] == retrieval and len(asked.removed["random"]) == 2
    assert [layer for layer, _ in asked.removed["random"]] == [0, 1] and not set(asked.removed["random"]) & set(retrieval)
    for name, heads in asked.removed.items():
        without, _ = transformers_reading(folders[family], ids, 6, heads)
        assert asked.without[name].ids == without[:len(asked.without[name].ids)], name
        assert asked.same(name) == (asked.without[name].ids == asked.written.ids)
    assert seen[-1][0] == seen[-1][1]  # every layer read, for the three answers
    n = len(ids)
    for t, (token, copy) in enumerate(zip(asked.written.ids, asked.copies)):
        votes = {}
        for layer in range(model.layers):
            for head in range(model.heads):
                key = int(np.argmax(attentions[layer, head, n - 1 + t, :n + t]))
                if key < n and ids[key] == token:
                    votes.setdefault(key, []).append((layer, head))
        if not votes:
            assert copy.position is None and copy.heads == ()
            continue
        most = max(len(v) for v in votes.values())
        assert copy.position in [k for k, v in votes.items() if len(v) == most] and ids[copy.position] == token
        assert set(copy.heads) == set(votes[copy.position])


def test_a_text_too_long_to_answer_is_refused_in_words(folders):
    model = models.load(folders["gpt2"], device="cpu")
    with pytest.raises(models.TextError, match="at most"):
        lab.ask(model, "the dog " * 5000, steps=6)


def test_smollm2_finds_a_key_hidden_in_a_text_of_ones_own_and_says_where_it_read_it():
    """A garden diary no other test names, a shed's code hidden in its middle (about 1,040 pieces, past the 512 a run
    reads): SmolLM2 writes the code, and each of the code's pieces was copied from the sentence that holds it."""
    model = models.load("smollm2")
    key = "31846"
    text = own_text(np.random.default_rng(5), key, words=700)
    asked = lab.ask(model, text, steps=8)
    assert asked.written.text.strip().startswith(key), asked.written.text
    start = text.index(f"The code for the shed is {key}.")
    sentence = range(start, start + len(f"The code for the shed is {key}."))
    digits = [t for t, piece in enumerate(model.reader.labels(asked.written.ids)) if piece.strip("·").isdigit()]
    assert "".join(model.reader.labels(asked.written.ids)[t].strip("·") for t in digits) == key
    for t in digits:
        copy = asked.copies[t]
        assert copy.position is not None and len(copy.heads) >= 2, t
        a, b = asked.pieces.spans[copy.position]
        assert a in sentence and b - 1 in sentence, (t, a, b)
