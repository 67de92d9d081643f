"""A model's files, read safely: config.json, safetensors headers and tensors, the tokenizer, the memory budget.

Weights are read from safetensors (and GGUF, attnviz.models.gguf) only. A pickled checkpoint (.bin, .pt, .pth, .ckpt,
.pkl) is refused before anything opens it: unpickling runs whatever code the file holds. A safetensors file is checked
from its header (8 bytes of length, then JSON) before a tensor is read, so a truncated or malformed file gets a message,
and the weights' bytes are known, and held against the memory budget, before they are loaded.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import torch

from attnviz.cache import parse_size  # noqa: F401  also read from here
from attnviz.models.errors import ModelError

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
SAFETENSORS_INDEX = "model.safetensors.index.json"
HEADER_LIMIT = 100 * 2**20  # safetensors' own limit on a header's size
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
BUDGET_SETTING = "ATTNVIZ_MODEL_BUDGET"
BUDGET_SHARE = 0.6  # of the memory the machine has free when no budget is set


# ---------------------------------------------------------------- sizes and the budget


# What attnviz's engine computes, as the messages name it (attnviz.models.FAMILIES lists each model_type).
def size_text(nbytes: float) -> str:
    """Bytes for people: 1 decimal in MB or GB (powers of 1,000), as disks and downloads count them."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{int(nbytes)} bytes"


def free_memory() -> int | None:
    """Bytes the machine has available now (Linux's MemAvailable, else the free physical pages), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_budget(setting: str | None = None) -> tuple[int, str]:
    """(bytes, where the number comes from): the setting ATTNVIZ_MODEL_BUDGET ('4GB', '1.5GiB', bytes) when it is
    given and valid, else BUDGET_SHARE of the memory free now (4 GB where that cannot be read)."""
    setting = os.environ.get(BUDGET_SETTING) if setting is None else setting
    if setting and setting.strip():
        try:
            value = parse_size(setting)
            if value > 0:
                return value, f"{BUDGET_SETTING}={setting.strip()}"
        except ValueError:
            pass
    free = free_memory()
    if free is None:
        return 4 * 10**9, "a default of 4 GB (the free memory could not be read)"
    return int(free * BUDGET_SHARE), f"{int(BUDGET_SHARE * 100)} % of the {size_text(free)} free now"


def check_budget(name: str, need: int, budget: int | None = None) -> None:
    """ModelError when `need` bytes of weights exceed the budget (memory_budget() when None), naming both."""
    limit, why = (budget, "the budget given") if budget is not None else memory_budget()
    if need > limit:
        raise ModelError(f"{name} needs {size_text(need)} for its weights, more than the memory budget of "
                         f"{size_text(limit)} ({why}). Set {BUDGET_SETTING} (for example {BUDGET_SETTING}=16GB) to "
                         "allow more, on a machine that has it.")


def compute_dtype(stored: torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype a device computes weights stored as `stored` in: half precision (fp16, bf16) stays as it is on a GPU;
    the CPU computes in float32 (its bf16 and fp16 matrix products ran 60× slower than float32 here, bench_models)."""
    if stored in (torch.float16, torch.bfloat16) and device.type in ("cuda", "mps"):
        if device.type == "mps" and stored == torch.bfloat16 and not torch.backends.mps.is_macos_or_newer(14, 0):
            return torch.float32
        return stored
    return torch.float32


# ---------------------------------------------------------------- config.json


SETTING_LIMIT = 1 << 20  # no size in a config.json that shapes a model may pass this (a width, a vocabulary, positions)


def layer_types(config: dict, layers: int, sliding) -> list[str]:
    """Each layer's "sliding_attention" or "full_attention": config.json's layer_types where it names them, else
    `sliding(i)` of each layer i (from 0), the family's own pattern. A list of another length or of other kinds is a
    ModelError that says what config.json must hold."""
    types = config.get("layer_types") or ["sliding_attention" if sliding(i) else "full_attention" for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers or set(types) - {"sliding_attention", "full_attention"}:
        raise ModelError(f"config.json's layer_types must name each of the {layers} layers sliding_attention or "
                         "full_attention.")
    return types


def setting(config: dict, key: str, default: int | None = None, *, low: int = 1, high: int = SETTING_LIMIT) -> int:
    """A config.json number that shapes the model, checked before use: whole, within [low, high]. A missing one
    without a default is a KeyError (load_folder says the setting is lacking)."""
    value = config.get(key, default)
    if value is None:
        raise KeyError(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ModelError(f"config.json's {key} is {value!r}; it must be a whole number from {low:,} to {high:,}.")
    return value


def head_shape(width_key: str, width: int, heads_key: str, heads: int, kv_key: str | None = None,
               kv_heads: int | None = None, head_dim: int | None = None) -> tuple[int, int]:
    """(key/value heads, head size) of checked settings: the heads must divide the width where no head size is given,
    and the key/value heads must divide the heads; a ModelError names the settings and what they must be."""
    if head_dim is None and width % heads:
        raise ModelError(f"config.json's {width_key} ({width}) must be a multiple of {heads_key} ({heads}): each head "
                         "takes an equal part of the width.")
    kv_heads = kv_heads or heads
    if heads % kv_heads:
        raise ModelError(f"config.json's {heads_key} ({heads}) must be a multiple of {kv_key} ({kv_heads}): each "
                         "key/value head is shared by an equal group of query heads.")
    return kv_heads, head_dim or width // heads


def read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise ModelError(f"{folder.name} has no config.json: attnviz reads a model folder in Hugging Face's layout "
                         "(config.json, model.safetensors and the tokenizer's files), as save_pretrained writes it.")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelError(f"{folder.name}/config.json is not valid JSON ({error}).") from None
    if not isinstance(config, dict):
        raise ModelError(f"{folder.name}/config.json holds no settings (a JSON object is expected).")
    return config


# ---------------------------------------------------------------- safetensors


@dataclass(frozen=True)
class TensorInfo:
    file: Path
    dtype: torch.dtype
    shape: tuple[int, ...]
    nbytes: int


def refuse_pickles(folder: Path) -> None:
    """ModelError naming a pickled checkpoint and how to convert it, when the folder has one and no safetensors."""
    pickles = sorted(p.name for p in folder.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES)
    if pickles:
        raise ModelError(pickle_message(pickles[0]))
    raise ModelError(f"{folder.name} has no weights: attnviz reads model.safetensors (or sharded safetensors with "
                     f"{SAFETENSORS_INDEX}), or a .gguf file.")


def pickle_message(name: str) -> str:
    return (f"{name} is a pickled PyTorch file, and attnviz never unpickles a file: loading one can run any code it "
            "holds. Convert it to safetensors once, where you trust it, with the class for the model's kind, so that "
            "a decoder keeps its output head: in Python, model = AutoModelForCausalLM.from_pretrained(folder) (a "
            "decoder; AutoModelForSeq2SeqLM for an encoder–decoder, AutoModel for an encoder); "
            "model.save_pretrained(folder, safe_serialization=True). That writes model.safetensors beside it.")


def safetensors_files(folder: Path) -> list[Path]:
    """The folder's safetensors weights: model.safetensors, or the shards its index names."""
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
            raise ModelError(f"{folder.name}/{SAFETENSORS_INDEX} cannot be read ({error}).") from None
        files = [folder / shard for shard in shards]
        if any(Path(shard).name != shard for shard in shards):
            raise ModelError(f"{folder.name}/{SAFETENSORS_INDEX} names a shard outside the folder.")
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise ModelError(f"{folder.name} lacks the shard(s) its index names: {', '.join(missing[:3])}.")
        return files
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    others = sorted(folder.glob("*.safetensors"))
    if others:
        return others
    refuse_pickles(folder)
    return []  # not reached


def read_header(path: Path) -> dict[str, TensorInfo]:
    """The tensors a safetensors file holds, from its header alone, after checking that the header is whole JSON and
    every tensor's bytes lie inside the file."""
    size = path.stat().st_size
    with open(path, "rb") as file:
        start = file.read(8)
        if len(start) < 8:
            raise ModelError(f"{path.name} is not a safetensors file: it is {size} bytes long.")
        (length,) = struct.unpack("<Q", start)
        if length > HEADER_LIMIT or 8 + length > size:
            raise ModelError(f"{path.name} is truncated or not a safetensors file: its header claims {length:,} bytes, "
                             f"the file holds {size:,}.")
        try:
            header = json.loads(file.read(length).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ModelError(f"{path.name} is not a safetensors file: its header is not JSON.") from None
    if not isinstance(header, dict):
        raise ModelError(f"{path.name} is not a safetensors file: its header is not a JSON object.")
    data = size - 8 - length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = DTYPES[entry["dtype"]]
            shape = tuple(int(s) for s in entry["shape"])
            begin, end = (int(o) for o in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ModelError(f"{path.name}: the entry for {name!r} in its header is not a tensor's.") from None
        if end > data:
            raise ModelError(f"{path.name} is truncated: {name} ends at byte {end:,} of its data, which holds "
                             f"{data:,} bytes. Copy or download the file again.")
        tensors[name] = TensorInfo(path, dtype, shape, end - begin)
    return tensors


def read_headers(files: list[Path]) -> dict[str, TensorInfo]:
    tensors: dict[str, TensorInfo] = {}
    for path in files:
        tensors.update(read_header(path))
    return tensors


class Tensors:
    """Named tensors read one at a time from safetensors files (only those asked for), each checked against the shape
    the model's config gives it, moved to `device` in `dtype`. Names are looked up after a prefix the checkpoint may
    carry (a task head's wrapper: 'bert.', 'model.', 'transformer.', …)."""

    def __init__(self, infos: dict[str, TensorInfo], device: torch.device, dtype: torch.dtype, prefixes=("",)):
        self.infos, self.device, self.dtype = infos, device, dtype
        self.prefix = next((p for p in prefixes if any(k.startswith(p) for k in infos)), "")
        self._open: dict[Path, object] = {}

    def _full(self, name: str) -> str | None:
        """The stored name of `name`: after the prefix or without it, and a norm's weight and bias also under the
        older names gamma and beta (as early BERT checkpoints store them)."""
        old = name.removesuffix(".weight") + ".gamma" if name.endswith(".weight") else name.removesuffix(".bias") + ".beta"
        for candidate in (name, old):
            for full in (self.prefix + candidate, candidate):
                if full in self.infos:
                    return full
        return None

    def has(self, name: str) -> bool:
        return self._full(name) is not None

    def info(self, name: str) -> TensorInfo:
        full = self._full(name)
        if full is None:
            raise ModelError(f"The weights lack {self.prefix + name}: this checkpoint does not match its config.json.")
        return self.infos[full]

    def get(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        """The tensor `name`, which must have `shape`."""
        from safetensors import SafetensorError, safe_open

        info = self.info(name)
        if info.shape != tuple(shape):
            raise ModelError(f"{name} has shape {list(info.shape)}, but config.json makes it {list(shape)}: the weights "
                             "and the config are of different models.")
        full = self._full(name)
        try:
            if info.file not in self._open:
                self._open[info.file] = safe_open(str(info.file), framework="pt")
            tensor = self._open[info.file].get_tensor(full)
        except (SafetensorError, OSError, RuntimeError) as error:
            raise ModelError(f"{info.file.name} cannot be read ({error}).") from None
        return tensor.to(device=self.device, dtype=self.dtype)

    def optional(self, name: str, shape: tuple[int, ...]) -> torch.Tensor | None:
        return self.get(name, shape) if self.has(name) else None

    def stored_dtype(self) -> torch.dtype:
        """The floating dtype most of the weights are stored in."""
        counts: dict[torch.dtype, int] = {}
        for info in self.infos.values():
            if info.dtype.is_floating_point:
                counts[info.dtype] = counts.get(info.dtype, 0) + info.nbytes
        return max(counts, key=counts.get) if counts else torch.float32


# ---------------------------------------------------------------- the tokenizer


def load_tokenizer(folder: Path):
    """The folder's tokenizer as a `tokenizers.Tokenizer`: tokenizer.json, else what transformers builds from the
    other files a tokenizer saves (vocab.txt, vocab.json and merges.txt, a SentencePiece model). No padding, no
    truncation: attnviz counts the pieces itself."""
    from tokenizers import Tokenizer

    path = folder / "tokenizer.json"
    if path.is_file():
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as error:  # noqa: BLE001  the tokenizers library raises its own Exception for bad files
            raise ModelError(f"{folder.name}/tokenizer.json cannot be read ({error}).") from None
    else:
        tokenizer = _transformers_tokenizer(folder)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model", "source.spm")


def _transformers_tokenizer(folder: Path):
    if not any((folder / name).is_file() for name in TOKENIZER_FILES[1:]):
        raise ModelError(f"{folder.name} has no tokenizer: attnviz needs tokenizer.json (or vocab.txt, vocab.json with "
                         "merges.txt, or a SentencePiece model) beside the weights. Save the tokenizer into the same "
                         "folder: tokenizer.save_pretrained(folder).")
    try:
        from transformers import AutoTokenizer

        fast = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False, use_fast=True)
        backend = getattr(fast, "backend_tokenizer", None)
    except Exception as error:  # noqa: BLE001  transformers raises many kinds for a folder it cannot read
        raise ModelError(f"{folder.name}'s tokenizer cannot be read ({type(error).__name__}: {error}).") from None
    if backend is None:
        raise ModelError(f"{folder.name}'s tokenizer has no fast version; save it as tokenizer.json with transformers.")
    return backend
