"""The teacher key: what starting a class takes, so a student in the room cannot start (or use up) classes. As
Jupyter prints its token, the server prints a teacher link with the key when it starts (appkit/warm.py).

The key is ATTNVIZ_TEACHER_KEY where set (`attnviz --teacher-key KEY` sets it; replicas share it that way), else a
random key made once and kept in attnviz's cache folder (teacher_key, readable by its owner only), so a restart keeps
the link the teacher already has. No streamlit here."""

from __future__ import annotations

import hmac
import os
import secrets
import threading
import urllib.parse

from attnviz.cache import cache_root

KEY_SETTING = "ATTNVIZ_TEACHER_KEY"
KEY_FILE = "teacher_key"
PARAM = "teacher"  # the teacher link's URL parameter
MIN_CHARS = 12

_lock = threading.Lock()


def teacher_key() -> str:
    """The key: the setting's, else the cache folder's (made on first use)."""
    chosen = os.environ.get(KEY_SETTING, "").strip()
    if chosen:
        if len(chosen) < MIN_CHARS:
            raise ValueError(f"{KEY_SETTING} must be at least {MIN_CHARS} characters: a short key can be guessed.")
        return chosen
    path = cache_root() / KEY_FILE
    with _lock:
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        made = path.with_name(f"{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_urlsafe(18))
        try:
            os.link(made, path)  # whole or not at all: another process's key, made meanwhile, wins
        except FileExistsError:
            pass
        finally:
            os.unlink(made)
        return path.read_text().strip()


def is_key(given) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.strip().encode(), teacher_key().encode())


def link(base: str) -> str:
    """The teacher link on `base` (the server's address and base path): the Lesson in presenter mode, with the key."""
    return f"{base.rstrip('/')}/lesson?present=1&{PARAM}={urllib.parse.quote(teacher_key())}"
