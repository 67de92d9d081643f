"""The browser's attention math (attnviz/browser/weights.mjs, run by node) against the torch engine: the same raw scores in,
the same weights out (≤ 1e-6), over τ from 0.01 to 100, hard attention with ties, causal and hidden keys, fully
masked rows, huge scores, scores that leave float32, and 1 to 512 tokens. Also runs node's own tests (tests/js)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz.functional import attend, key_mask
from attnviz.embeddings import embed, tokenize

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")


@pytest.fixture(autouse=True)
def node_or_skip():
    """node runs the browser's code here; without it these tests skip, but fail where browsers are required (CI)."""
    if NODE is None:
        if os.environ.get("ATTNVIZ_REQUIRE_BROWSER") == "1":
            pytest.fail("node is not on PATH (ATTNVIZ_REQUIRE_BROWSER=1)")
        pytest.skip("node is not on PATH")
DOG = "When he saw his owner, the dog was happy, so he wagged his tail"


def vectors(glove, text: str, scale: float = 1.0) -> torch.Tensor:
    return torch.from_numpy(embed(tokenize(text), glove).vectors) * scale  # (n, 50)


def cases(glove) -> list[tuple[torch.Tensor, dict]]:
    """(inputs X, options of attend) for each case: X attends to itself."""
    dog = vectors(glove, DOG)
    ties = vectors(glove, "dog dog cat dog the dog")  # equal rows: equal scores in a row
    long = vectors(glove, " ".join(tokenize(DOG) * 40)[:100_000])[:512]
    out = [(dog, dict(scoring="scaled_dot", temperature=t)) for t in (0.01, 0.02, 0.2, 1.0, 5.0, 100.0)]
    out += [(dog, dict(scoring=s, temperature=0.5)) for s in ("dot", "cosine", "gaussian")]
    out += [(ties, dict(scoring="dot", hard=True, temperature=t)) for t in (1.0, 0.1, 50.0)]
    out += [(ties, dict(scoring="dot", temperature=0.05, is_causal=True)),
            (dog, dict(scoring="scaled_dot", hard=True, is_causal=True, temperature=0.2)),
            (dog, dict(scoring="scaled_dot", hidden=[1, 3, 4])),
            (dog, dict(scoring="scaled_dot", is_causal=True, hidden=[0])),  # the first query sees no key
            (dog, dict(scoring="scaled_dot", hidden=list(range(16)))),  # every row fully masked
            (dog, dict(scoring="scaled_dot", hard=True, hidden=list(range(16)))),
            (vectors(glove, DOG, 1e17), dict(scoring="dot", temperature=1.0)),  # scores near 1e35: finite weights
            (vectors(glove, DOG, 1e18), dict(scoring="dot", temperature=0.01)),  # S/τ past float32: no weights
            (vectors(glove, "dog"), dict(scoring="scaled_dot", temperature=0.3)),  # one token
            (long, dict(scoring="scaled_dot", temperature=0.5, is_causal=True)),
            (long, dict(scoring="dot", hard=True))]
    return out


def torch_weights(x: torch.Tensor, options: dict):
    options = dict(options)
    hidden = options.pop("hidden", None)
    mask = key_mask(x.shape[0], hidden) if hidden is not None else None
    result = attend(x, x, x, mask=mask, **options)
    return result.scores.numpy(), result.weights.numpy()


def browser_options(options: dict) -> dict:
    return {"tau": options.get("temperature", 1.0), "hard": options.get("hard", False),
            "causal": options.get("is_causal", False), "hidden": options.get("hidden", [])}


def test_browser_weights_equal_the_engine(glove, tmp_path):
    runs = [(x, options, *torch_weights(x, options)) for x, options in cases(glove)]
    payload = [{"scores": scores.tolist(), "n": scores.shape[0], "m": scores.shape[1], "options": browser_options(options)}
               for _, options, scores, _ in runs]
    (tmp_path / "cases.json").write_text(json.dumps(payload))
    subprocess.run([NODE, str(ROOT / "tests" / "js" / "parity.mjs"), str(tmp_path / "cases.json"), str(tmp_path / "out.json")],
                   check=True, capture_output=True, text=True)
    results = json.loads((tmp_path / "out.json").read_text())
    assert len(results) == len(runs)
    for (x, options, scores, expected), got in zip(runs, results):
        n, m = scores.shape
        weights = np.asarray(got["weights"]).reshape(n, m)
        finite = np.isfinite(expected).all(-1)  # (n,) rows the engine could compute
        assert got["overflow"] == [int(i) for i in np.flatnonzero(~finite)], options
        assert np.abs(weights[finite] - expected[finite]).max(initial=0) <= 1e-6, options
        assert np.isfinite(weights).all()
        blocked = [int(i) for i in np.flatnonzero(expected.sum(-1) == 0)] if finite.all() else got["blocked"]
        assert got["blocked"] == blocked, options
        if options.get("hard") and finite.all():
            assert np.array_equal(weights, expected), options  # one-hot on the very same key, ties included
    assert any(np.isfinite(e).all() and (e.sum(-1) == 0).any() for *_, e in runs)  # a fully masked row was covered
    assert any(not np.isfinite(e).all() for *_, e in runs)  # and an overflow


def test_several_heads_averaged_and_maximised_equal_the_engine(glove, tmp_path):
    """Four heads of seeded random projections (the Heads and layers page's): each head's softmax, then the mean over
    heads (the engine's own head average) or the maximum, under τ, hard attention, the causal mask and hidden keys."""
    from attnviz.sentence import Config, run

    x = embed(tokenize(DOG), glove).vectors  # (16, 50)
    settings = [dict(), dict(temperature=0.2), dict(hard=True), dict(mask="causal", temperature=5.0),
                dict(mask="keys", hidden=(2, 5))]
    runs, payload = [], []
    for setting in settings:
        view = run(x, Config(projection="random", heads=4, d_k=16, seed=3, **setting))
        raw = run(x, Config(projection="random", heads=4, d_k=16, seed=3))  # the scores the browser receives: τ = 1, no mask
        options = {"tau": setting.get("temperature", 1.0), "hard": setting.get("hard", False),
                   "causal": setting.get("mask") == "causal", "hidden": list(setting.get("hidden", ()))}
        for over, expected in (("mean", view.mean_weights), ("max", view.weights.max(0))):
            runs.append((setting, over, expected))
            payload.append({"scores": raw.scores.tolist(), "heads": 4, "n": 16, "m": 16, "options": options, "over": over})
    (tmp_path / "cases.json").write_text(json.dumps(payload))
    subprocess.run([NODE, str(ROOT / "tests" / "js" / "parity.mjs"), str(tmp_path / "cases.json"), str(tmp_path / "out.json")],
                   check=True, capture_output=True, text=True)
    for (setting, over, expected), got in zip(runs, json.loads((tmp_path / "out.json").read_text())):
        weights = np.asarray(got["weights"]).reshape(16, 16)
        assert np.abs(weights - expected).max() <= 1e-6, (setting, over)
        assert got["overflow"] == []
    assert not np.allclose(runs[0][2], runs[1][2])  # the mean and the maximum differ: the two are really told apart


def test_a_zoom_windows_rows_equal_the_engines_rows_of_the_whole_matrix(glove, tmp_path):
    """A long input's zoom window: the browser gets rows r0 … r0 + w − 1 with every key (rowStart = r0), and their
    weights equal those rows of the engine's whole matrix, the causal mask counted from the sentence's positions."""
    x = vectors(glove, " ".join(tokenize(DOG) * 40))[:600]  # (600, 50)
    settings = [dict(scoring="scaled_dot", is_causal=True, temperature=0.5), dict(scoring="dot", hard=True, is_causal=True),
                dict(scoring="scaled_dot", hidden=[0, 250, 599]), dict(scoring="scaled_dot", is_causal=True, hidden=[0])]
    runs, payload = [], []
    for options, r0 in zip(settings, (200, 536, 0, 0)):
        scores, weights = torch_weights(x, options)  # (600, 600) each
        rows = slice(r0, r0 + 64)
        runs.append((options, weights[rows]))
        payload.append({"scores": scores[rows].tolist(), "n": 64, "m": 600, "options": {**browser_options(options), "rowStart": r0}})
    (tmp_path / "cases.json").write_text(json.dumps(payload))
    subprocess.run([NODE, str(ROOT / "tests" / "js" / "parity.mjs"), str(tmp_path / "cases.json"), str(tmp_path / "out.json")],
                   check=True, capture_output=True, text=True)
    for (options, expected), got in zip(runs, json.loads((tmp_path / "out.json").read_text())):
        assert np.abs(np.asarray(got["weights"]).reshape(64, 600) - expected).max() <= 1e-6, options
    assert runs[3][1][0].sum() == 0 and runs[3][1][1].sum() > 0.99  # row 0 sees no key (causal, key 0 hidden); row 1 does


def test_ties_go_to_the_first_key(glove):
    """The tie case really has ties: equal scores in a row, and the engine's one-hot on the first of them."""
    x = vectors(glove, "dog dog cat dog the dog")
    scores, weights = torch_weights(x, dict(scoring="dot", hard=True))
    assert scores[0, 0] == scores[0, 1] == scores[0, 3] and weights[0].argmax() == 0


def test_node_tests_pass():
    run = subprocess.run([NODE, "--test", str(ROOT / "tests" / "js")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:]


def test_the_pages_csv_and_npy_equal_pythons_byte_for_byte(tmp_path):
    """What the heatmap's CSV and .npy buttons save (attnviz/browser/files.mjs) equals attnviz.export's files of the same
    float32 matrix: numbers from 1e-38 to 1e38, zeros, negatives, non-finite ones, exact powers of ten and values that
    round up to one, and labels a spreadsheet would run or a CSV reader would split."""
    import base64
    import io

    from attnviz.export import matrix_csv, weights_npy

    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(16), 16).astype(np.float32)  # (16, 16) rows of a softmax
    spread = (rng.standard_normal((8, 40)) * 10.0 ** rng.integers(-38, 38, (8, 40))).astype(np.float32)  # (8, 40)
    edges = np.array([[0.0, 1.0, 10.0, 1e-5, 9.999995, 0.1, 1e38, -1e-38, np.nan, np.inf, -np.inf, -0.0]], np.float32)
    hostile = ["=SUM(A1)", "+1", "-x", "@who", 'say "hi"', "a,b", "tab\there", "line\nbreak", "dog", "ü🐕", "", "'"]
    cases = [(weights, [f"q{i}" for i in range(16)], [f"k{j}" for j in range(16)], "query \\ key"),
             (spread, [f"r{i}" for i in range(8)], [f"c{j}" for j in range(40)], "layer \\ head"),
             (edges, ["edges"], hostile, "query \\ key")]
    # JSON has no NaN or ∞: they go as the strings "nan", "inf", "-inf", which node turns back into numbers
    payload = [{"values": [float(v) if np.isfinite(v) else str(v) for v in m.ravel()], "rows": r, "cols": c, "corner": k}
               for m, r, c, k in cases]
    (tmp_path / "in.json").write_text(json.dumps(payload))
    script = ROOT / "tests" / "js" / "files.mjs"
    subprocess.run([NODE, str(script), str(tmp_path / "in.json"), str(tmp_path / "out.json")], check=True,
                   capture_output=True, text=True)
    for (matrix, rows, cols, corner), got in zip(cases, json.loads((tmp_path / "out.json").read_text())):
        assert got["csv"].encode("utf-8") == matrix_csv(matrix, rows, cols, corner=corner)
        saved = base64.b64decode(got["npy"])
        assert saved == weights_npy(matrix)
        np.testing.assert_array_equal(np.load(io.BytesIO(saved), allow_pickle=False), matrix)


def test_a_layers_sliding_window_is_the_same_in_the_browser_the_engine_and_the_downloads(glove, tmp_path):
    """A layer's own window (Mistral's on every layer, ModernBERT's either side): the browser's weights, the Python
    mirror the downloads hold (weights_under_view) and the engine's own mask (engine.allowed_keys) agree."""
    from dataclasses import replace

    from attnviz.models import engine
    from attnviz.sentence import weights_under_view

    x = vectors(glove, DOG)  # (16, 50)
    scores = (x @ x.T / np.sqrt(x.shape[1])).numpy()  # (16, 16)
    n = scores.shape[0]
    views = [{"mask": "causal", "window": 3}, {"mask": "none", "window": 2, "window_both": True},
             {"mask": "causal", "window": 3, "temp": 0.3, "hard": True}]
    payload = [{"scores": scores.tolist(), "n": n, "m": n,
                "options": {"tau": v.get("temp", 1.0), "hard": v.get("hard", False), "causal": v["mask"] == "causal",
                            "window": v["window"], "windowBoth": v.get("window_both", False)}} for v in views]
    (tmp_path / "cases.json").write_text(json.dumps(payload))
    subprocess.run([NODE, str(ROOT / "tests" / "js" / "parity.mjs"), str(tmp_path / "cases.json"), str(tmp_path / "out.json")],
                   check=True, capture_output=True, text=True)
    results = json.loads((tmp_path / "out.json").read_text())
    base = engine.Architecture(family="llama", kind="decoder", layers=1, heads=1, kv_heads=1, head_dim=50, d_model=50,
                               vocab=10, max_positions=64, norm="rms", post_norm=False, positions="rotary",
                               activation="silu", gated=True, windows=(3,))
    for view, got in zip(views, results):
        weights, allowed = weights_under_view(scores, view)
        assert np.abs(np.asarray(got["weights"]).reshape(n, n) - weights).max() <= 1e-6, view
        arch = base if view["mask"] == "causal" else replace(base, kind="encoder", windows=(view["window"],))
        assert np.array_equal(allowed, engine.allowed_keys(arch, 0, torch.arange(n), n).numpy()), view


def test_a_learned_sink_column_is_the_same_in_the_browser_the_downloads_and_the_engine(glove, tmp_path):
    """gpt-oss's learned sink drawn as one more column: the browser's weights (n, n + 1), the downloads' mirror
    (weights_under_view with sink) and the engine's softmax with the sink (engine.sunk_softmax, its share 1 − Σ α)
    agree; the sink column is read under the causal mask, a window and hidden keys, and a hard row may pick it."""
    from attnviz.models import engine
    from attnviz.sentence import weights_under_view

    x = vectors(glove, DOG)  # (16, 50)
    scores = (x @ x.T / np.sqrt(x.shape[1])).numpy()  # (16, 16)
    n, sink = scores.shape[0], float(np.median(np.diag(scores)))  # above some rows' best score, below others'
    drawn = np.concatenate([scores, np.full((n, 1), sink, np.float32)], 1)  # (n, n + 1)
    views = [{"mask": "causal"}, {"mask": "causal", "temp": 0.5, "window": 3}, {"mask": "causal_keys", "hide": [0]},
             {"mask": "causal", "hard": True}, {"mask": "none", "temp": 3.0}]
    payload = [{"scores": drawn.tolist(), "n": n, "m": n + 1,
                "options": {"tau": v.get("temp", 1.0), "hard": v.get("hard", False), "causal": v["mask"] != "none",
                            "hidden": v.get("hide", []), "window": v.get("window", 0), "sink": True}} for v in views]
    (tmp_path / "cases.json").write_text(json.dumps(payload))
    subprocess.run([NODE, str(ROOT / "tests" / "js" / "parity.mjs"), str(tmp_path / "cases.json"), str(tmp_path / "out.json")],
                   check=True, capture_output=True, text=True)
    results = json.loads((tmp_path / "out.json").read_text())
    causal = np.tril(np.ones((n, n), bool))  # (n, n)
    for view, got in zip(views, results):
        weights, allowed = weights_under_view(drawn, {**view, "sink": True})  # (n, n + 1) each
        assert np.abs(np.asarray(got["weights"]).reshape(n, n + 1) - weights).max() <= 1e-6, view
        assert allowed[:, n].all() and np.allclose(weights.sum(-1), 1, atol=1e-6), view
    plain, _ = weights_under_view(drawn, {"mask": "causal", "sink": True})
    masked = torch.from_numpy(np.where(causal, scores, -np.inf))[None]  # (1, n, n)
    theirs = engine.sunk_softmax(masked, torch.tensor([sink]))[0].numpy()  # (n, n) the engine's, sink column dropped
    assert np.abs(plain[:, :n] - theirs).max() <= 1e-6 and np.allclose(plain[:, n], 1 - theirs.sum(-1), atol=1e-6)
    hard = np.asarray(results[3]["weights"]).reshape(n, n + 1)
    best = np.where(causal, scores, -np.inf).max(-1)  # (n,) each row's strongest piece
    assert np.array_equal(hard[:, n] == 1, best < sink) and 0 < (best < sink).sum() < n  # hard rows go to the sink
