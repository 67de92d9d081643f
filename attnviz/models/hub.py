"""Models already in the local Hugging Face hub cache, named as the hub names them ("org/name", or "org/name@revision"
for a branch, a tag or a commit), found with no network request: the cache's own layout is read, as huggingface_hub
writes it (`models--org--name/refs/<revision>` holds a commit; `snapshots/<commit>/` the files, links into `blobs/`).
Where the cache is: HF_HUB_CACHE, else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
~/.cache/huggingface/hub, as huggingface_hub decides it. What is loaded from a snapshot is what a folder gives:
config.json, the safetensors weights and the tokenizer, never a pickle."""

from __future__ import annotations

import os
import re
from pathlib import Path

from attnviz.models.errors import ModelError

_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?"  # a hub owner or name: no slash, no leading dot, no "..": see _safe
ID = re.compile(rf"^({_PART})/({_PART})(?:@({_PART}))?$")


def cache_dir(environ=os.environ) -> Path:
    """The hub cache huggingface_hub would use with these settings."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    return Path(environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "huggingface" / "hub"


def _safe(text: str) -> bool:
    return ".." not in text


def is_id(source) -> bool:
    """Whether `source` names a hub model ("org/name[@revision]") rather than a file or folder that exists."""
    return (isinstance(source, str) and bool(ID.match(source)) and _safe(source)
            and not Path(source).expanduser().exists())


def snapshot(model_id: str, environ=os.environ) -> Path:
    """The cached snapshot folder of `model_id` ("org/name" at main, or "org/name@revision"); a ModelError says what
    the cache holds where it does not hold that."""
    match = ID.match(model_id)
    if not match or not _safe(model_id):
        raise ModelError(f"{model_id!r} is not a hub model's name: it reads org/name, or org/name@revision.")
    owner, name, revision = match.groups()
    root = cache_dir(environ)
    repo = root / f"models--{owner}--{name}"
    if not repo.is_dir():
        raise ModelError(f"{owner}/{name} is not in the Hugging Face cache at {root}, and attnviz downloads nothing. "
                         f"Download it once where there is a network (`hf download {owner}/{name}`), set HF_HUB_CACHE to "
                         "the cache that holds it, or give the model's folder.")
    revision = revision or "main"
    ref = repo / "refs" / revision
    commit = ref.read_text(encoding="utf-8").strip() if ref.is_file() else revision
    folder = repo / "snapshots" / commit
    if not (_safe(commit) and re.fullmatch(_PART, commit) and folder.is_dir()):
        held = sorted(p.name for p in (repo / "refs").glob("*") if p.is_file())
        held += sorted(p.name for p in (repo / "snapshots").glob("*") if p.is_dir())
        raise ModelError(f"The cache holds {owner}/{name}, but not its revision {revision!r}; it holds "
                         f"{', '.join(held) or 'no snapshot'}.")
    return folder


def cached(environ=os.environ) -> list[str]:
    """Every model in the cache with a snapshot at main, by its hub name (sorted)."""
    found = []
    for repo in sorted(cache_dir(environ).glob("models--*--*")):
        owner, _, name = repo.name.removeprefix("models--").partition("--")
        model_id = f"{owner}/{name}"
        try:
            snapshot(model_id, environ)
        except ModelError:
            continue
        found.append(model_id)
    return found
