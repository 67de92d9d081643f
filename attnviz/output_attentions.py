"""What transformers returns with `output_attentions=True`, as attnviz draws it: the input bertviz's head_view and
model_view take (one (batch, heads, n, n) tensor per layer, batch 1, and the tokens), turned into a Run
(attnviz.models) whose scores are ln α, so every view of a run draws it. Each shape is checked, and a wrong one gets a
message in bertviz's terms that says what to change."""

from __future__ import annotations

import numpy as np

from attnviz.models.pieces import Pieces, spaced
from attnviz.models.result import KIND_TITLES, Attention, Run

SETTING = "Make sure you set output_attentions=True when you call the model (or load it)."
# What transformers gives bertviz's recipe as pasted: SDPA (its default attention) computes no weights, so
# outputs.attentions is an empty tuple; and outputs[-1] of BERT-like models is cross_attentions, empty for an encoder.
EMPTY = ("Load the model with eager attention, which computes the weights (SDPA, transformers' default, returns none): "
         "AutoModel.from_pretrained(name, attn_implementation=\"eager\"); and pass outputs.attentions, not outputs[-1] "
         "(for BERT-like models outputs[-1] is cross_attentions, an empty tuple for an encoder).")


def stack(attention, what: str = "attention") -> np.ndarray:
    """One float32 (L, H, Tq, Tk) of every layer's weights: `attention` a tuple or list of (1, H, Tq, Tk) tensors or
    arrays (transformers' output), or one (L, H, Tq, Tk) / (L, 1, H, Tq, Tk) array."""
    if attention is None:
        raise ValueError(f"{what} is None: the model returned no attention weights. {SETTING} {EMPTY}")
    if hasattr(attention, "attentions") and not hasattr(attention, "detach"):  # transformers' whole output
        attention = attention.attentions
        if attention is None:
            raise ValueError(f"The model's output has no attentions. {SETTING} {EMPTY}")
    layers = list(attention) if isinstance(attention, (tuple, list)) else None
    if layers is None:
        array = _array(attention, what)
        if array.ndim == 5 and array.shape[1] == 1:
            array = array[:, 0]
        if array.ndim != 4:
            raise ValueError(f"{what} should be a tuple with one (batch, heads, queries, keys) tensor per layer; this is "
                             f"one array of shape {array.shape}. {SETTING}")
        layers = list(array[:, None])
    if not layers:
        raise ValueError(f"{what} is empty: the model returned no layers' weights. {EMPTY}")
    arrays = [_array(layer, f"{what}[{i}]") for i, layer in enumerate(layers)]
    for i, array in enumerate(arrays):
        if array.ndim != 4:
            raise ValueError(f"{what}[{i}] has shape {array.shape}; each layer's should be (batch, heads, queries, keys), "
                             f"4 dimensions. {SETTING}")
        if array.shape[0] != 1:
            raise ValueError(f"{what}[{i}] holds a batch of {array.shape[0]}; draw one example at a time, as bertviz "
                             "does: pass a batch of 1 (or attention[layer][k:k + 1] for each layer).")
    shapes = {array.shape for array in arrays}
    if len(shapes) > 1:
        raise ValueError(f"The layers of {what} differ in shape ({', '.join(map(str, sorted(shapes)))}): attnviz draws "
                         "layers with the same number of heads over the same tokens.")
    weights = np.stack([array[0] for array in arrays]).astype(np.float32)  # (L, H, Tq, Tk)
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError(f"{what} holds NaN, infinite or negative values: these are not attention weights (the softmax's "
                         "output, each row summing to 1).")
    sums = weights.sum(-1)  # (L, H, Tq)
    if not np.allclose(sums[sums > 0], 1, atol=1e-2):
        raise ValueError(f"The rows of {what} do not sum to 1 (they range {sums.min():.3g} … {sums.max():.3g}): pass the "
                         "weights after the softmax, as output_attentions gives them, not the scores before it.")
    return weights


def _array(value, what: str) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, on any device and dtype
        value = value.detach().float().cpu().numpy()
    try:
        return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise ValueError(f"{what} is not an array of numbers ({type(value).__name__}). {SETTING}") from None


def pieces_of(tokens, count: int, what: str = "tokens", prettify: bool = True) -> Pieces:
    """The tokens (one per position, as tokenizer.convert_ids_to_tokens gives them) as attnviz's Pieces; with
    `prettify` (bertviz's prettify_tokens), byte-level BPE's Ġ and SentencePiece's ▁ are shown as spaces."""
    if isinstance(tokens, str) or tokens is None:
        raise ValueError(f"{what} should be a list with one token per position (tokenizer.convert_ids_to_tokens("
                         "inputs['input_ids'][0])), not " + ("None." if tokens is None else "one string."))
    tokens = [str(t) for t in tokens]
    if len(tokens) != count:
        raise ValueError(f"{what}: {len(tokens)} tokens for weights over {count} positions. Pass one token per position "
                         "of the input the weights were computed on: tokenizer.convert_ids_to_tokens(input_ids[0]).")
    shown = [spaced(t.replace("Ġ", " ").replace("▁", " ") if prettify else t) for t in tokens]
    return Pieces(tokens, list(range(count)), [None] * count, [(0, 0)] * count, " ".join(tokens), [False] * count,
                  [False] * count, shown)


def causal(weights: np.ndarray) -> bool:
    """Whether no query puts weight on a key after it, in any layer or head (a decoder's self-attention)."""
    n, m = weights.shape[-2:]
    return n == m and n > 1 and not weights[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]].any()


def chosen(count: int, wanted, what: str) -> list[int]:
    """bertviz's include_layers or include_heads: the indices (from 0) of the `count` layers or heads to draw, all by
    default, each checked."""
    if wanted is None:
        return list(range(count))
    if isinstance(wanted, (str, bytes)) or not hasattr(wanted, "__iter__"):
        raise ValueError(f"{what} should be a list of indices counted from 0, not {wanted!r}.")
    picked = list(wanted)
    if not picked:
        raise ValueError(f"{what} is empty: give the indices to draw, counted from 0, or leave it out.")
    bad = [i for i in picked if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < count]
    if bad:
        raise ValueError(f"{what} holds {bad[0]!r}; the model has {count}, counted from 0 to {count - 1}.")
    if len(set(picked)) != len(picked):
        raise ValueError(f"{what} names an index twice: {picked}.")
    return [int(i) for i in picked]


def select(weights: np.ndarray, layers: list[int], heads: list[int]) -> np.ndarray:
    """(len(layers), len(heads), Tq, Tk) of weights (L, H, Tq, Tk)."""
    return np.ascontiguousarray(weights[np.ix_(layers, heads)])


def run_of(attention, tokens, *, name: str = "your model", prettify: bool = True, include_layers=None,
           include_heads=None) -> tuple[Run, list[int], list[int]]:
    """A self-attention run from bertviz's input: every layer's weights (transformers' output_attentions) and the
    tokens; with bertviz's include_layers and include_heads, only those. Returns (the run, the layers and the heads it
    holds, as the model counts them from 0)."""
    weights = stack(attention)
    layers, heads = chosen(weights.shape[0], include_layers, "include_layers"), chosen(weights.shape[1], include_heads,
                                                                                        "include_heads")
    weights = select(weights, layers, heads)
    n, m = weights.shape[-2:]
    if n != m:
        raise ValueError(f"attention is {n} queries × {m} keys: self-attention is square. For an encoder–decoder, pass "
                         "encoder_attention=, decoder_attention= and cross_attention=, as bertviz takes them.")
    pieces = pieces_of(tokens, n, prettify=prettify)
    is_causal = causal(weights)
    view = Attention("self", KIND_TITLES["self"], weights, pieces, pieces, is_causal)
    return Run(name, "decoder" if is_causal else "encoder", "transformers", pieces, {"self": view}), layers, heads


def seq2seq_run_of(encoder_attention, decoder_attention, cross_attention, encoder_tokens, decoder_tokens, *,
                   kind: str = "encoder", name: str = "your model", prettify: bool = True, include_layers=None,
                   include_heads=None) -> tuple[Run, list[int], list[int]]:
    """An encoder–decoder's run from bertviz's seq2seq input; `kind` ("encoder", "decoder" or "cross") is the one its
    views draw (the run's main attention). Returns what run_of returns; include_layers and include_heads pick from
    the drawn kind's layers and heads."""
    if kind not in ("encoder", "decoder", "cross"):
        raise ValueError(f"kind must be 'encoder', 'decoder' or 'cross', not {kind!r}.")
    given = {"encoder": encoder_attention, "decoder": decoder_attention, "cross": cross_attention}
    stacked = {k: stack(v, f"{k}_attention") for k, v in given.items() if v is not None}
    if kind not in stacked:
        raise ValueError(f"kind={kind!r} draws {kind}_attention, which was not given.")
    layers = chosen(stacked[kind].shape[0], include_layers, "include_layers")
    heads = chosen(stacked[kind].shape[1], include_heads, "include_heads")
    stacked[kind] = select(stacked[kind], layers, heads)
    source = target = None
    if "encoder" in stacked or "cross" in stacked:
        count = (stacked["encoder"].shape[-1] if "encoder" in stacked else stacked["cross"].shape[-1])
        source = pieces_of(encoder_tokens, count, "encoder_tokens", prettify)
    if "decoder" in stacked or "cross" in stacked:
        count = (stacked["decoder"].shape[-2] if "decoder" in stacked else stacked["cross"].shape[-2])
        target = pieces_of(decoder_tokens, count, "decoder_tokens", prettify)
    sides = {"encoder": (source, source, False), "decoder": (target, target, True), "cross": (target, source, False)}
    kinds = [kind] + [k for k in stacked if k != kind]  # the drawn kind first: it is the run's main attention
    attention = {}
    for k in kinds:
        queries, keys, is_causal = sides[k]
        if stacked[k].shape[-2:] != (len(queries), len(keys)):
            raise ValueError(f"{k}_attention is {stacked[k].shape[-2]} × {stacked[k].shape[-1]}, but the tokens give "
                             f"{len(queries)} queries × {len(keys)} keys.")
        attention[k] = Attention(k, KIND_TITLES[k], stacked[k], queries, keys, is_causal)
    return Run(name, "encoder-decoder", "transformers", source or target, attention), layers, heads
