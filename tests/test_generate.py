"""A decoder writing piece by piece (attnviz.models.generate): greedy pieces equal transformers' generate, the run's
weights equal transformers' eager attention over the whole text, sampling is seeded, top-k and top-p keep the sets
their definitions give, and bad requests get a message."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402

from attnviz import models  # noqa: E402
from attnviz.models.generate import MAX_STEPS  # noqa: E402

PROMPT = "The cat watched the dog"
GENERATORS = ("gpt2", "llama", "qwen3", "phi3", "gpt_neox", *tiny_models.NEW_DECODERS)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {family: tiny_models.build(family, root) for family in (*GENERATORS, "bert", "t5")}


def reference(folder):
    import transformers as T

    return T.AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()


@pytest.mark.parametrize("family", GENERATORS)
def test_greedy_pieces_and_every_weight_equal_transformers(family, folders):
    model = models.load(folders[family], device="cpu")
    written = model.generate(PROMPT, steps=12)
    module = reference(folders[family])
    prompt = model.tokenize(PROMPT).ids
    with torch.no_grad():
        made = module.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, num_beams=1,
                               pad_token_id=0)[0, len(prompt):].tolist()
    assert written.new_ids == made[:len(written.new_ids)]
    assert written.stopped == ("end of text" if len(made) < 12 or 0 in made else "steps")
    ids = written.run.pieces.ids
    assert ids == prompt + written.new_ids and written.prompt == len(prompt)
    with torch.no_grad():
        out = module(torch.tensor([ids]), output_attentions=True)
    assert np.abs(written.run.weights - torch.stack(out.attentions)[:, 0].numpy()).max() <= 1e-4
    assert [s.chosen for s in written.steps] == written.new_ids
    assert all(len(s.kept) == 1 and s.kept[0] == s.chosen for s in written.steps)  # greedy keeps one piece


@pytest.mark.slow
def test_smollm2_greedy_equals_transformers_from_the_same_file(smollm2_reference):
    model = models.load("smollm2", device="cpu")
    text = "When he saw his owner, the dog was"
    written = model.generate(text, steps=8)
    module = smollm2_reference[1]
    prompt = model.tokenize(text).ids
    with torch.no_grad():
        made = module.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False, num_beams=1)[0, len(prompt):]
    assert written.new_ids == made.tolist()[:len(written.new_ids)]


def test_sampling_is_seeded_and_top_k_top_p_keep_the_sets_of_their_definitions(folders):
    model = models.load(folders["llama"], device="cpu")
    a = model.generate(PROMPT, steps=10, temperature=1.3, top_k=20, top_p=0.9, seed=7)
    b = model.generate(PROMPT, steps=10, temperature=1.3, top_k=20, top_p=0.9, seed=7)
    assert a.new_ids == b.new_ids
    others = {tuple(model.generate(PROMPT, steps=10, temperature=1.3, seed=s).new_ids) for s in range(5)}
    assert len(others) > 1  # other seeds write other texts
    run = model.run(PROMPT)
    for step, grown in zip(a.steps, range(len(a.steps))):
        logits = run.next_logits.astype(np.float64) / 1.3
        p = np.exp(logits - logits.max())
        p /= p.sum()
        order = np.argsort(-p, kind="stable")
        before = np.cumsum(p[order]) - p[order]
        expected = order[(np.arange(len(p)) < 20) & (before < 0.9)]
        assert set(step.kept.tolist()) == set(expected.tolist()) and step.chosen in expected
        np.testing.assert_allclose(step.probs, p[step.offered], atol=1e-6)
        assert step.p_chosen == pytest.approx(p[step.chosen], abs=1e-6)  # p_T: under T, before the cut
        assert step.p_drawn == pytest.approx(p[step.chosen] / p[expected].sum(), abs=1e-6)  # P(drawn): renormalised
        run = model.extend(run, step.chosen)


def test_bad_requests_get_a_message(folders):
    model = models.load(folders["llama"], device="cpu")
    for steps in (0, MAX_STEPS + 1, "3", 2.5, True):
        with pytest.raises(models.ModelError, match="steps must be"):
            model.generate(PROMPT, steps=steps)
    with pytest.raises(models.ModelError, match="temperature"):
        model.generate(PROMPT, temperature=-1)
    with pytest.raises(models.ModelError, match="temperature"):
        model.generate(PROMPT, temperature=float("nan"))
    with pytest.raises(models.ModelError, match="top_p"):
        model.generate(PROMPT, top_p=0)
    with pytest.raises(models.ModelError, match="top_k"):
        model.generate(PROMPT, top_k=-2)
    with pytest.raises(models.TextError):
        model.generate("   ")
    model.reader.max_pieces = len(model.tokenize(PROMPT))  # the prompt fills what the model reads
    with pytest.raises(models.ModelError, match="no room to write"):
        model.generate(PROMPT)
    from attnviz.models.generate import generate

    bert = models.load(folders["bert"], device="cpu")
    with pytest.raises(models.ModelError, match="needs a decoder"):
        generate(bert, PROMPT)
    t5 = models.load(folders["t5"], device="cpu")
    with pytest.raises(models.ModelError, match="steps must be"):
        t5.generate(PROMPT, steps=MAX_STEPS + 1)
    with pytest.raises(models.TextError):
        t5.generate("")


def sent_rows(data: dict, n: int) -> dict[tuple[int, int], np.ndarray]:
    """The timeline's weights as the page unpacks them: (head, row) → the row's weights over keys 0 … row (across:
    over every source piece)."""
    import base64

    values = np.frombuffer(base64.b64decode(data["weights"]), "<u2") / 65535
    rows, at = {}, 0
    for h in range(data["heads"]):
        for i in range(data["first_row"], n):
            keys = len(data["keys"]) if data["cross"] else i + 1
            rows[h, i] = values[at:at + keys]
            at += keys
    assert at == len(values)
    return rows


def test_the_timeline_sends_each_step_its_offer_and_the_layers_weights(folders, monkeypatch):
    from attnviz import figures
    from attnviz.figures import generation as timeline

    model = models.load(folders["llama"], device="cpu")
    written = model.generate(PROMPT, steps=9, temperature=1.2, top_k=6, top_p=0.8, seed=3)
    labels = written.run.pieces.labels()
    n = len(labels)
    data = figures.timeline_data(written, labels, model.reader.labels, 1, head=2, sampler="T = 1.2")
    assert data["tokens"] == labels and data["prompt"] == n - 9 and data["first_row"] == 0 and data["head"] == 2
    rows = sent_rows(data, n)
    for (h, i), row in rows.items():
        assert np.abs(row - written.run.weights[1, h, i, : i + 1]).max() <= 1e-4
    assert len(rows) == model.heads * n  # every row of every head
    for step, sent in zip(written.steps, data["steps"]):
        kept = set(step.kept.tolist())
        assert sent["kept"] == [int(i) in kept for i in step.offered] and sent["kept_count"] == len(kept)
        assert sent["offered"] == model.reader.labels([int(i) for i in step.offered])
        assert sent["chosen_offered"] == (step.offered.tolist().index(step.chosen) if step.chosen in step.offered else -1)
        assert sent["p_chosen"] == pytest.approx(step.p_chosen, abs=1e-4) and 0 < step.p_chosen <= 1
        assert sent["p_drawn"] == pytest.approx(step.p_drawn, abs=1e-4) and step.p_chosen <= step.p_drawn <= 1
    assert figures.payload_bytes(data) < 2_000_000

    monkeypatch.setattr(timeline, "WHOLE_LIMIT", 10)  # too many numbers: only the rows the steps computed are sent
    short = figures.timeline_data(written, labels, model.reader.labels, 1)
    assert short["first_row"] == data["prompt"] - 1
    assert set(sent_rows(short, n)) == {(h, i) for h in range(model.heads) for i in range(data["prompt"] - 1, n)}
    assert figures.payload_bytes(short) < figures.payload_bytes(data)


def test_an_encoder_decoder_writes_as_transformers_does_and_every_step_has_its_cross_attention(folders):
    """A tiny T5: greedy pieces equal transformers' generate(do_sample=False); the run's decoder and cross-attention
    equal transformers' eager forward over the source and the written pieces; each step's cross-attention row is the
    one the model had when it chose that piece; sampling is seeded."""
    import transformers as T

    model = models.load(folders["t5"], device="cpu")
    assert model.computed_by == "transformers" and model.kind == "encoder-decoder"
    written = model.generate(PROMPT, steps=10)
    reference_model = T.AutoModelForSeq2SeqLM.from_pretrained(str(folders["t5"]), attn_implementation="eager").eval()
    source = torch.tensor([model.tokenize(PROMPT).ids])  # (1, n)
    made = reference_model.generate(source, max_new_tokens=10, do_sample=False, num_beams=1, use_cache=False,
                                    min_new_tokens=0)[0].tolist()
    ends = written.stopped == "end of text"
    assert [0, *written.new_ids] == made and (ends == (made[-1] == 1))
    ids = torch.tensor([[0, *written.new_ids]])  # (1, t)
    with torch.no_grad():
        out = reference_model(input_ids=source, decoder_input_ids=ids, output_attentions=True)
    cross = written.run.attention["cross"].weights  # (L, H, t, n)
    assert np.abs(cross - torch.stack(out.cross_attentions)[:, 0].numpy()).max() <= 1e-5
    assert np.abs(written.run.attention["decoder"].weights - torch.stack(out.decoder_attentions)[:, 0].numpy()).max() <= 1e-5
    assert written.prompt == 1 and written.run.attention["decoder"].queries.ids == [0, *written.new_ids]
    for k, step in enumerate(written.steps):  # step k's choice is the argmax of the logits at decoder position k
        assert step.chosen == int(out.logits[0, k].argmax()) == written.new_ids[k]
    a = model.generate(PROMPT, steps=8, temperature=1.5, seed=4)
    assert a.new_ids == model.generate(PROMPT, steps=8, temperature=1.5, seed=4).new_ids

    from attnviz import figures

    labels = written.run.attention["decoder"].queries.labels()
    data = figures.timeline_data(written, labels, model.reader.labels, 2, kind="cross")
    assert data["cross"] and data["keys"] == written.run.pieces.labels() and data["tokens"] == labels
    rows = sent_rows(data, len(labels))
    assert len(rows) == model.heads * len(labels)
    for (h, i), row in rows.items():
        assert np.abs(row - cross[2, h, i]).max() <= 1e-4
