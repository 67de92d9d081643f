"""The scan's fused CPU kernel (fused.c): each row of a block's scores read once for its strongest keys and largest
score, then once more from the cache for its exponentials, their sum, Σ e^{s′} s′ and each chunk's sum. On a CPU
these are otherwise seven passes of torch's kernels over every score (scan.py), and they set the scan's speed.

It is built with the machine's C compiler the first time a scan needs it (about 0.2 s), kept in attnviz's cache
folder (ATTNVIZ_CACHE, else ~/.cache/attnviz; the system's temporary folder where that cannot be written) under a
name that holds the source's, compiler's and processor's digest, and loaded with ctypes. It is taken on Linux on
x86-64, where glibc's vector exponential makes it fast; elsewhere, with no compiler, when the build fails, or with
ATTNVIZ_FUSED=0, the scan takes torch's passes, which give the same numbers (tests/test_fused.py, test_scan.py)."""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("fused.c")
FLAGS = ("-O3", "-ffast-math", "-fopenmp", "-march=native", "-fPIC")  # compiling only
# Linking takes none of FLAGS' -ffast-math: with it, GCC links crtfastmath.o, whose constructor turns denormals off
# (flush to zero) for the whole process that loads the library.
LINK = ("-shared", "-fopenmp")
SETTING = "ATTNVIZ_FUSED"  # "0": never build or use the kernel

_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_tried = False


def _processor() -> str:
    """What -march=native compiles for: the processor's flags, so that a cache folder shared between machines never
    hands one a kernel built for another."""
    try:
        with open("/proc/cpuinfo") as info:
            return next((line for line in info if line.startswith("flags")), "")
    except OSError:
        return platform.processor()


def openmp_runtimes() -> set[str]:
    """The OpenMP runtimes loaded in this process (GNU's libgomp, or Intel's libiomp5, which serves the same calls)."""
    try:
        with open("/proc/self/maps") as maps:
            return {line.split()[-1] for line in maps if "/libgomp" in line or "/libiomp5" in line}
    except OSError:
        return set()


def _compile(cc: str, target: Path) -> None:
    """Builds the kernel into target, linked to torch's OpenMP runtime where torch has one loaded: its threads are
    then the kernel's threads (the compiler's own libgomp would start a second set, to meet torch's on the cores)."""
    runtime = sorted(openmp_runtimes())
    with tempfile.TemporaryDirectory(dir=target.parent) as folder:  # then renamed: a whole file or none
        built, objects = Path(folder) / target.name, Path(folder) / "fused.o"
        run = dict(capture_output=True, timeout=120, check=True)
        subprocess.run([cc, *FLAGS, "-c", "-o", str(objects), str(SOURCE)], **run)
        if runtime:
            subprocess.run([cc, "-shared", "-o", str(built), str(objects), runtime[0], "-lm"], **run)
        else:
            subprocess.run([cc, *LINK, "-o", str(built), str(objects), "-lm"], **run)
        os.replace(built, target)


def compiler() -> str | None:
    """The C compiler: CC, else cc or gcc on PATH."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _own(folder: Path) -> bool:
    """Whether only this user can write in folder: a kernel is loaded from nowhere another user could have put one."""
    status = folder.stat()
    return status.st_uid == os.getuid() and not status.st_mode & 0o022


def _build() -> ctypes.CDLL | None:
    if os.environ.get(SETTING) == "0" or platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    cc = compiler()
    if cc is None:
        return None
    from attnviz.cache import cache_root

    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
        key = [SOURCE.read_text(), " ".join(FLAGS), " ".join(LINK), version, _processor(), *sorted(openmp_runtimes())]
    except (OSError, subprocess.SubprocessError):
        return None
    name = f"fused-{hashlib.sha256(chr(0).join(key).encode()).hexdigest()[:16]}.so"
    for folder in (cache_root() / "kernels", Path(tempfile.gettempdir()) / f"attnviz-kernels-{os.getuid()}"):
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _own(folder):
                continue
            target = folder / name
            if not target.exists():
                _compile(cc, target)
            library = ctypes.CDLL(str(target))
            break
        except (OSError, subprocess.SubprocessError):
            continue
    else:
        return None
    library.attnviz_block.argtypes = ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                       ctypes.c_float, ctypes.c_float] + [ctypes.c_void_p] * 6
                                      + [ctypes.c_int64] * 4 + [ctypes.c_void_p] * 3 + [ctypes.c_int])
    library.attnviz_block.restype = ctypes.c_int
    return library


def library() -> ctypes.CDLL | None:
    """The loaded kernel, built on the first call; None where it cannot be had (see the module's note)."""
    global _library, _tried
    with _lock:
        if not _tried:
            _library, _tried = _build(), True
    return _library


def usable(scores: torch.Tensor) -> bool:
    """Whether `scores` can go through the kernel: float32 on the CPU, contiguous, and the kernel built."""
    return (scores.device.type == "cpu" and scores.dtype == torch.float32 and scores.is_contiguous()
            and library() is not None)


def checked(name: str, tensor, dims: int, shape: tuple | None = None) -> None:
    """What the C code reads or writes through a pointer: float32 on the CPU, contiguous, of the shape it assumes."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "cpu" or tensor.dtype != torch.float32:
        raise ValueError(f"the kernel's {name} must be a float32 tensor on the CPU")
    if tensor.dim() != dims or not tensor.is_contiguous() or (shape is not None and tuple(tensor.shape) != shape):
        raise ValueError(f"the kernel's {name} must be contiguous, of shape {shape or f'{dims} dimensions'}; "
                         f"got {tuple(tensor.shape)}{'' if tensor.is_contiguous() else ', not contiguous'}")


def block(scores: torch.Tensor, exps: torch.Tensor, kept: int, chunk: int, floor: float, lines=None):
    """For scores (H, r, k), k a multiple of `chunk`, hidden keys at the lowest float: each row's `kept` (at least 1)
    largest scores and their keys, largest first ((H, r, kept) float32 and int32), and with s′ = max(s − the row's largest, floor),
    e^{s′} written into exps (H, r, k) (0 for a hidden key), Z′ = Σ e^{s′} (H, r, 1), Σ e^{s′} s′ (H, r) and each
    chunk's Σ e^{s′} (H, r, k / chunk). `exps` may be `scores` itself: each e^{s′} is written over the s it is made
    from, once the row's search has read it (the scan keeps one buffer a block, not two).

    `lines`, where given, is (start, n, verticals, slashes, sinks): the block's rows are queries start … start + r − 1
    of n pieces, and each row's weights α = e^{s′} / (Z′ + e^{sink − max}) are added by key into verticals (H, W),
    W ≥ k, and by offset i − j into slashes (H, 2n − 1), offset d at d + n − 1 (both float64, contiguous); sinks (H,)
    float32 or None."""
    checked("scores", scores, 3)
    heads, r, k = scores.shape
    checked("exps", exps, 3, (heads, r, k))
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 16 or k % chunk or chunk % 16:
        raise ValueError(f"the kernel reads whole chunks of a multiple of 16 keys: {k} keys, chunks of {chunk}")
    if isinstance(kept, bool) or not isinstance(kept, int) or kept < 1:  # C would write past its buffers
        raise ValueError(f"the kernel keeps each row's strongest keys: kept must be at least 1, got {kept!r}")
    kept = min(kept, k)
    best = scores.new_empty((heads, r, kept))  # (H, r, kept)
    keys = torch.empty((heads, r, kept), dtype=torch.int32)  # (H, r, kept)
    total = scores.new_empty((heads, r, 1))  # (H, r, 1)
    moment = scores.new_empty((heads, r))  # (H, r)
    sums = scores.new_empty((heads, r, k // chunk))  # (H, r, k / chunk)
    start, n, width, pointers = 0, 0, 0, (None, None, None)
    if lines is not None:
        start, n, verticals, slashes, sinks = lines
        width = verticals.shape[-1] if isinstance(verticals, torch.Tensor) and verticals.dim() == 2 else 0
        for name, tensor, shape in (("verticals", verticals, (heads, max(width, k))),
                                    ("slashes", slashes, (heads, 2 * n - 1))):
            if (not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.float64 or tensor.device.type != "cpu"
                    or not tensor.is_contiguous() or tuple(tensor.shape) != shape):
                raise ValueError(f"the kernel's {name} must be a contiguous float64 tensor on the CPU of shape {shape}")
        if sinks is not None:
            checked("sinks", sinks, 1, (heads,))
        if not 0 <= start and start + r <= n:
            raise ValueError(f"the block's rows {start} … {start + r - 1} lie outside the {n} pieces")
        pointers = (verticals.data_ptr(), slashes.data_ptr(), None if sinks is None else sinks.data_ptr())
    failed = library().attnviz_block(scores.data_ptr(), heads * r, k, chunk, kept, floor, torch.finfo(torch.float32).min,
                                     exps.data_ptr(), best.data_ptr(), keys.data_ptr(), total.data_ptr(),
                                     moment.data_ptr(), sums.data_ptr(), r, start, n, width, *pointers,
                                     torch.get_num_threads())
    if failed:
        raise MemoryError("the scan's kernel found no memory for its search of the strongest keys")
    return best, keys, total, moment, sums
