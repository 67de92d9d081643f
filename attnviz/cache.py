"""attnviz's caches: the folder on disk (cache_root) and a file's content key for a folder in it (content_key), and a
cache in memory that holds at most a number of bytes, not a
number of entries. No streamlit here.

A page's computed attention is 2 KB for a sentence and 130 MB for 4,096 tokens with eight heads, so a
cache of "8 entries" could hold anything from nothing to gigabytes. This one evicts the least recently
used entries until the values it holds fit its budget.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Hashable

CACHE_SETTING = "ATTNVIZ_CACHE"  # the environment variable that moves attnviz's disk cache


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
          "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20, "gi": 2**30, "gib": 2**30, "ti": 2**40, "tib": 2**40}


_DIGESTS: dict[tuple[str, int, int], str] = {}


def content_key(source: Path) -> str:
    """The file's SHA-256 (its first 16 hex digits): a cache folder for exactly this content, wherever it lies.
    Computed once per (path, size, modification time) in a process (the head scores' key reads it on every page)."""
    stat = source.stat()
    key = (str(source.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        with open(source, "rb") as file:
            _DIGESTS[key] = hashlib.file_digest(file, "sha256").hexdigest()[:16]
    return _DIGESTS[key]


def parse_size(text: str) -> int:
    """'4GB', '1.5 GiB', '800MB', '123456' as bytes; ValueError for anything else."""
    match = _SIZE.match(text or "")
    if not match:
        raise ValueError(text)
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "").lower()])


def memory_bound(text: str) -> int | None:
    """A memory setting's bytes, at least 1 MiB, or None for 'all' (no bound); ValueError, in words, for anything else."""
    if text.strip().lower() == "all":
        return None
    try:
        size = parse_size(text)
    except ValueError:
        size = 0
    if size < 2**20:
        raise ValueError(f"{text.strip()[:40]!r} is not a size of at least 1 MiB: give one such as 2GiB or 800MB, or "
                         "'all' for the model's whole context")
    return size


def cache_root() -> Path:
    """attnviz's folder on disk (de-quantized weights, head scores, compiled kernels, a class's SQLite store)."""
    return Path(os.environ.get(CACHE_SETTING) or Path.home() / ".cache" / "attnviz")


class _Computing:
    """One computation under way: its waiters block on `done`, then read `value` where `ok`."""

    def __init__(self):
        self.done = threading.Event()
        self.ok = False
        self.value = None


class ByteBudgetCache:
    """Least recently used values within `budget` bytes, as measured by `size_of`. Safe across threads.

    A value larger than the whole budget is computed and returned but not kept. Callers that ask for the same key
    while it is being computed wait for that one computation (a class of 30 moving to one step computes it once).
    """

    def __init__(self, budget: int, size_of: Callable[[Any], int], evicted: Callable[[], Any] | None = None):
        self.budget = budget
        self.size_of = size_of
        self.evicted = evicted  # called once it has let values go (outside the lock), e.g. to collect their memory now
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()  # key -> (value, size)
        self._bytes = 0
        self._lock = threading.Lock()
        self._computing: dict[Hashable, _Computing] = {}

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value for `key`, computed by `compute()` (outside the lock) when it is not held; a caller that finds it
        being computed waits for that computation instead of starting another (and computes it itself if that one
        failed)."""
        while True:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return self._entries[key][0]
                running = self._computing.get(key)
                if running is None:
                    running = self._computing[key] = _Computing()
                    break
            running.done.wait()
            if running.ok:
                return running.value
        try:
            value = compute()
        except BaseException:
            with self._lock:
                self._computing.pop(key, None)
            running.done.set()
            raise
        running.value, running.ok = value, True
        try:
            self._keep(key, value)
        finally:
            with self._lock:
                self._computing.pop(key, None)
            running.done.set()  # the waiters take the value; the computation's record goes with the last of them
        return value

    def _keep(self, key: Hashable, value: Any) -> None:
        size = self.size_of(value)
        gone = []
        with self._lock:  # no other thread computed `key` meanwhile: they waited for this computation
            if size <= self.budget:
                self._entries[key] = (value, size)
                self._bytes += size
            while self._bytes > self.budget:
                _, (old, old_size) = self._entries.popitem(last=False)
                self._bytes -= old_size
                gone.append(old)
        if gone and self.evicted is not None:
            gone.clear()  # the cache's last references to them: the callback finds them free
            self.evicted()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


LARGE_BLOCK = 2**20  # blocks of this many bytes and more come straight from the system, and go back to it when freed
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def return_large_blocks() -> bool:
    """Where the C library is glibc's: every block of LARGE_BLOCK bytes or more this process allocates is mapped from
    the system and given back when freed. By default glibc raises that threshold to the largest block freed so far
    (up to 32 MiB), so a scan's tensors of a few MB a layer came from its heap, and the holes they left there stayed
    in the process's memory: a scan of SmolLM2's 8,192 pieces peaked 1,228 MiB over the warm model with the default,
    1,050 MiB with this (docs/benchmarks.md, "A whole context within 1 GiB"). For a server: it is the process's
    setting, not the library's. Returns whether it was set."""
    import ctypes

    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK))
    except (OSError, AttributeError):  # not glibc: its own allocator's ways
        return False
