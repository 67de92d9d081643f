"""The scan's fused CPU kernel (attnviz.models.fused, fused.c) against the formulas written out in torch, in float64:
each row's strongest keys against torch.topk, and e^{max(s − max, floor)}, Z′, Σ e^{s′} s′ and each chunk's sum,
for rows whose scores rise (a head that reads the latest keys), fall, tie, hide keys, or hold fewer keys than it
keeps."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from attnviz.models import fused
from attnviz.models.gguf import CACHE_SETTING

ROOT = Path(__file__).resolve().parents[1]

LOWEST = torch.finfo(torch.float32).min
FLOOR = -80.0


@pytest.fixture(autouse=True)
def kernel():
    """The kernel, built; without it these tests skip and say why, except with ATTNVIZ_REQUIRE_KERNEL=1 (CI), when
    they fail."""
    if fused.library() is None:
        message = "no C compiler here to build the scan's kernel (attnviz.models.fused)"
        if os.environ.get("ATTNVIZ_REQUIRE_KERNEL") == "1":
            pytest.fail(message)
        pytest.skip(message)


def rows(kind: str, heads: int, r: int, k: int) -> torch.Tensor:
    """Scores (heads, r, k) of one kind, the hidden keys at the lowest float."""
    generator = torch.Generator().manual_seed(len(kind) * 1000 + k)
    scores = torch.randn(heads, r, k, generator=generator) * 3  # (H, r, k)
    if kind == "rising":
        scores = torch.sort(scores, -1).values  # every key beats the ones before it
    elif kind == "falling":
        scores = torch.sort(scores, -1, descending=True).values
    elif kind == "ties":
        scores = scores.round()  # many keys share each value
    elif kind == "hidden":  # a causal block: query i of the block reads keys up to k − r + i
        ahead = torch.arange(k)[None, :] > (k - r + torch.arange(r))[:, None]  # (r, k)
        scores = scores.masked_fill(ahead, LOWEST)
        scores[:, 0, 3:] = LOWEST  # a row with 3 keys to read, fewer than it keeps
    elif kind == "far apart":
        scores[..., ::7] -= 200.0  # below the floor, where exp's results would be subnormal
    return scores.contiguous()


def expected(scores: torch.Tensor, top: int, chunk: int) -> dict[str, torch.Tensor]:
    """What the kernel computes, written out: s′ in float32, as the kernel and torch's passes round it, the rest in
    float64."""
    shifted = (scores - scores.amax(-1, keepdim=True)).clamp(min=FLOOR).double()  # (H, r, k)
    exps = torch.exp(shifted).masked_fill(scores == LOWEST, 0.0)  # (H, r, k)
    return dict(best=torch.topk(scores.double(), top, -1).values, exps=exps, total=exps.sum(-1, keepdim=True),
                moment=(exps * shifted).sum(-1), sums=exps.unflatten(-1, (-1, chunk)).sum(-1))


@pytest.mark.parametrize("k", [64, 320, 4224])
@pytest.mark.parametrize("kind", ["random", "rising", "falling", "ties", "hidden", "far apart"])
@pytest.mark.parametrize("top", [1, 8, 64])
def test_the_kernel_equals_the_formulas_written_out(kind, k, top):
    scores = rows(kind, 3, 40, k)
    exps = torch.full_like(scores, float("nan"))  # every entry must be written
    best, keys, total, moment, sums = fused.block(scores, exps, top, 64, FLOOR)
    want = expected(scores, top, 64)
    assert torch.equal(best.double(), want["best"])  # the strongest scores, largest first, exactly
    assert torch.equal(scores.gather(-1, keys.long()), best)  # each named key carries its score
    named = keys.sort(-1).values  # (H, r, top)
    assert (named[..., 1:] > named[..., :-1]).all() and (keys >= 0).all() and (keys < k).all()  # distinct keys
    assert torch.allclose(exps.double(), want["exps"], rtol=1e-6, atol=0)
    assert (exps[scores == LOWEST] == 0).all()  # a hidden key's weight is exactly 0
    for name, got in (("total", total), ("moment", moment), ("sums", sums)):
        assert torch.allclose(got.double(), want[name], rtol=2e-6, atol=1e-6), name


@pytest.mark.parametrize("kind", ["random", "rising", "hidden", "far apart"])
def test_the_kernel_writes_the_exponentials_over_the_scores_as_into_a_buffer_of_their_own(kind):
    """The scan hands the kernel one buffer for both: each e^{s′} written over its s gives what a second buffer gets,
    bit for bit, and the same strongest keys and sums."""
    scores = rows(kind, 3, 40, 4224)
    apart = torch.empty_like(scores)
    kept = fused.block(scores, apart, 8, 64, FLOOR)
    inplace = scores.clone()
    over = fused.block(inplace, inplace, 8, 64, FLOOR)
    assert torch.equal(inplace, apart)
    assert all(torch.equal(a, b) for a, b in zip(kept, over))
    assert torch.allclose(inplace.double(), expected(scores, 8, 64)["exps"], rtol=1e-6, atol=0)


def test_the_kernel_fills_whole_blocks_of_a_scan_shape():
    """A scan's block: 9 heads × 128 queries over 8,192 keys, the strongest 8 of each row against topk."""
    scores = rows("random", 9, 128, 8192)
    exps = torch.empty_like(scores)
    best, keys, total, _, sums = fused.block(scores, exps, 8, 64, FLOOR)
    assert torch.equal(best, torch.topk(scores, 8, -1).values)
    assert torch.allclose(total, exps.double().sum(-1, keepdim=True).float(), rtol=1e-6)
    chunks = exps.double().view(9, 128, 8192 // 64, 64).sum(-1)  # (H, r, k / 64): each chunk's Σ e^{s′}, by torch
    assert torch.allclose(sums.double(), chunks, rtol=1e-5)


def in_a_fresh_process(script: str, tmp_path, **env) -> str:
    """What `script` prints, run in a new Python process with attnviz's cache in tmp_path (a kernel built there)."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, CACHE_SETTING: str(tmp_path), **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_kernel_runs_on_torchs_own_openmp_threads(tmp_path):
    """Linked to the OpenMP runtime torch loaded: after loading the kernel, a fresh process holds one runtime, torch's,
    and no second one whose threads would meet torch's on the cores."""
    out = in_a_fresh_process("import torch\nfrom attnviz.models import fused\nbefore = fused.openmp_runtimes()\n"
                             "assert fused.library() is not None\nprint(len(before), len(fused.openmp_runtimes()))", tmp_path)
    assert out == "1 1"


def test_loading_the_kernel_leaves_denormals_on(tmp_path):
    """Built without torch's runtime (the fallback link), the kernel must not link crtfastmath.o (-ffast-math at the
    link), whose constructor sets flush-to-zero for the whole process: the smallest normal double / 4 stays above 0."""
    script = ("from attnviz.models import fused\nfused.openmp_runtimes = lambda: set()  # the fallback build\n"
              "tiny = 2.2250738585072014e-308\nassert tiny / 4 != 0.0\nassert fused.library() is not None\n"
              "print(tiny / 4 != 0.0)")
    assert in_a_fresh_process(script, tmp_path) == "True"


def test_the_boundary_to_c_checks_what_it_hands_over():
    scores = rows("random", 2, 4, 64)
    exps = torch.empty_like(scores)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="kept must be at least 1"):
            fused.block(scores, exps, bad, 64, FLOOR)
    with pytest.raises(ValueError, match="float32"):
        fused.block(scores.double(), exps, 4, 64, FLOOR)
    with pytest.raises(ValueError, match="contiguous"):
        fused.block(scores.transpose(0, 1), exps, 4, 64, FLOOR)
    with pytest.raises(ValueError, match="exps must be contiguous, of shape"):
        fused.block(scores, exps[:, :2], 4, 64, FLOOR)
    with pytest.raises(ValueError, match="whole chunks"):
        fused.block(scores, exps, 4, 0, FLOOR)


def test_the_kernel_is_built_once_into_the_cache_and_a_missing_compiler_leaves_torchs_passes(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temporary"))  # the fallback folder, here too
    (tmp_path / "temporary").mkdir()
    monkeypatch.setenv(CACHE_SETTING, str(tmp_path))
    built = fused._build()
    assert built is not None
    [kernel] = (tmp_path / "kernels").glob("fused-*.so")
    stamp = kernel.stat().st_mtime_ns
    assert fused._build() is not None and kernel.stat().st_mtime_ns == stamp  # taken from the cache, not rebuilt
    monkeypatch.setenv(CACHE_SETTING, str(tmp_path / "elsewhere"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    assert fused._build() is None
    monkeypatch.setenv("CC", "false")  # a compiler that fails
    assert fused._build() is None
    assert not list((tmp_path / "elsewhere").rglob("*.so")) and not list((tmp_path / "temporary").rglob("*.so"))
    monkeypatch.delenv("CC")
    (tmp_path / "a file").write_text("")
    monkeypatch.setenv(CACHE_SETTING, str(tmp_path / "a file"))  # a cache folder that cannot be made
    assert fused._build() is not None and len(list((tmp_path / "temporary").glob("attnviz-kernels-*/fused-*.so"))) == 1
    shared = tmp_path / "shared"
    (shared / "kernels").mkdir(parents=True)
    (shared / "kernels").chmod(0o777)  # where another user could have put a kernel: never loaded from
    monkeypatch.setenv(CACHE_SETTING, str(shared))
    assert fused._build() is not None and not list((shared / "kernels").iterdir())
    monkeypatch.setenv(fused.SETTING, "0")
    assert fused._build() is None


def test_the_kernel_source_compiles_without_warnings(tmp_path):
    done = subprocess.run([fused.compiler(), *fused.FLAGS, "-Wall", "-Wextra", "-c", "-o", str(tmp_path / "fused.o"),
                           str(fused.SOURCE)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
