"""Head scores kept on disk by the model's content and the corpus's definition, `attnviz heads` with its progress bar,
and the same command under torchrun with two CPU processes (gloo), which must give one process's scores."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402
from page_support import component_data  # noqa: E402

from attnviz import heads, models  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = [s for s in tiny_models.CORPUS] + list(tiny_models.SENTENCES.values())


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_models.build("bert", tmp_path_factory.mktemp("tiny"))


def attnviz_heads(args: list[str], cache: Path, *, world: int = 1) -> subprocess.CompletedProcess:
    env = {**os.environ, "ATTNVIZ_CACHE": str(cache), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    launch = [sys.executable, "-m", "attnviz.cli"] if world == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}", "-m", "attnviz.cli"]
    return subprocess.run([*launch, "heads", *args], env=env, capture_output=True, text=True, timeout=600)


def test_scores_are_kept_by_content_and_corpus_and_read_back(folder, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_CACHE", str(tmp_path / "cache"))
    model = models.load(folder, device="cpu")
    assert heads.kept(model, SENTENCES) is None
    seen = []
    found = heads.cached(model, SENTENCES, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (len(SENTENCES) + heads.PROBES, len(SENTENCES) + heads.PROBES)
    path = heads.cache_path(model, SENTENCES)
    assert path.is_file() and path.parent == tmp_path / "cache" / "heads"
    again = heads.kept(model, SENTENCES)
    assert set(again.scores) == set(found.scores)
    assert all(np.array_equal(again.scores[k], found.scores[k]) for k in found.scores)
    moved = shutil.copytree(folder, tmp_path / "elsewhere")  # the same content elsewhere: the same kept scores
    assert heads.cache_path(models.load(moved, device="cpu"), SENTENCES).name.split("-", 1)[1] == path.name.split("-", 1)[1]
    assert heads.cache_path(model, SENTENCES[:-1]) != path  # another corpus: measured again
    assert np.array_equal(heads.measure(model, SENTENCES).scores["previous"], found.scores["previous"])


def test_a_file_that_is_not_kept_scores_is_refused(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(heads.HeadsError, match="not a file of head scores"):
        heads.load(bad)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, meta=np.array([{"format": 1}], dtype=object))
    with pytest.raises(heads.HeadsError):
        heads.load(pickled)  # object arrays are never unpickled


@pytest.mark.slow
def test_the_command_measures_with_a_progress_bar_and_writes_what_the_pages_read(folder, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n\n", encoding="utf-8")
    done = attnviz_heads([str(folder), "--corpus", str(corpus), "--out", str(tmp_path / "out.npz")], tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert f"] {len(SENTENCES) + heads.PROBES}/{len(SENTENCES) + heads.PROBES}" in done.stderr
    assert "previous piece: layer" in done.stdout
    written = heads.load(tmp_path / "out.npz")
    kept = list((tmp_path / "cache" / "heads").glob("*.npz"))
    assert len(kept) == 1 and np.array_equal(heads.load(kept[0]).scores["sink"], written.scores["sink"])
    missing = attnviz_heads([str(folder), "--corpus", str(tmp_path / "none.txt")], tmp_path / "cache")
    assert missing.returncode != 0 and "--corpus" in missing.stderr and "Traceback" not in missing.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    said = attnviz_heads([str(folder), "--corpus", str(empty)], tmp_path / "cache")
    assert said.returncode != 0 and "no sentence" in said.stderr


@pytest.mark.slow
def test_two_gloo_processes_under_torchrun_give_one_processs_scores(folder, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES), encoding="utf-8")
    one = attnviz_heads([str(folder), "--corpus", str(corpus), "--out", str(tmp_path / "one.npz")], tmp_path / "a")
    two = attnviz_heads([str(folder), "--corpus", str(corpus), "--out", str(tmp_path / "two.npz")], tmp_path / "b", world=2)
    assert one.returncode == 0 and two.returncode == 0, two.stderr[-2000:]
    assert "2 processes" in two.stderr
    a, b = heads.load(tmp_path / "one.npz"), heads.load(tmp_path / "two.npz")
    assert set(a.scores) == set(b.scores) and a.sentences == b.sentences
    for name in a.scores:
        assert np.abs(a.scores[name] - b.scores[name]).max() <= 1e-6, name
    for name in a.control:
        assert np.abs(a.control[name] - b.control[name]).max() <= 1e-6, name


@pytest.mark.slow
def test_a_page_draws_while_the_scores_are_measured_and_colours_the_atlas_when_they_are_in(tmp_path, monkeypatch):
    """No page waits on head scores: the first run shows a progress bar and the rest of the page; once the thread
    has them, the next run colours the atlas by them (and they are on disk for the next server)."""
    import time

    from streamlit.testing.v1 import AppTest

    from appkit.served import _jobs

    monkeypatch.setenv("ATTNVIZ_CACHE", str(tmp_path / "cache"))
    _jobs.clear()  # no scores measured earlier in this process: the page must measure them
    at = AppTest.from_file(str(ROOT / "pages" / "trained.py"), default_timeout=300)
    at.query_params.update({"score": "previous", "bycolour": "1", "text": "the dog saw the cat"})
    started = time.perf_counter()
    at.run()
    assert not at.exception and time.perf_counter() - started < 30
    assert any("Measuring every head of minilm" in str(p.proto.text) for p in at.get("progress"))
    assert any(d.get("layers") == 6 for d in (component_data(c) for c in at.get("bidi_component")))
    deadline = time.perf_counter() + 240
    while time.perf_counter() < deadline and not list((tmp_path / "cache" / "heads").glob("*.npz")):
        time.sleep(0.5)
    time.sleep(1.0)
    at.run()
    assert not at.exception and not at.get("progress")
    atlas = next(d for d in (component_data(c) for c in at.get("bidi_component")) if "measure" in d)
    assert atlas["measure"]["name"] == heads.SCORES["previous"] and atlas["score_bars"]
