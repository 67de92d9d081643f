"""Encoder–decoder attention as in our notes: padded batches, padding and causal masks, cross-attention,
batch matrix multiplication, a stack of layers and attention rollout.

Mask shapes follow the notes, with True = may attend:
encoder self-attention (B, 1, T_in, T_in), decoder self-attention (B, 1, T_out, T_out),
cross-attention (B, 1, T_out, T_in): queries from the decoder, keys and values from the encoder memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.functional import attend, causal_mask, entropy, make_projections, multi_head


def pad_batch(sequences: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack (T_b, d) arrays into x (B, T, d) with zero padding, and valid (B, T): True on real tokens."""
    longest = max(len(s) for s in sequences)
    d = sequences[0].shape[1]
    x = torch.zeros(len(sequences), longest, d)  # (B, T, d)
    valid = torch.zeros(len(sequences), longest, dtype=torch.bool)  # (B, T)
    for b, s in enumerate(sequences):
        x[b, : len(s)] = torch.as_tensor(s, dtype=torch.float32)
        valid[b, : len(s)] = True
    return x, valid


def padding_mask(valid_query: torch.Tensor, valid_key: torch.Tensor) -> torch.Tensor:
    """(B, 1, Tq, Tk): a query may attend to every real key; padding keys are hidden."""
    return valid_key[:, None, None, :].expand(-1, 1, valid_query.shape[1], -1)  # (B, 1, Tq, Tk)


def decoder_mask(valid: torch.Tensor) -> torch.Tensor:
    """(B, 1, T_out, T_out): causal and padding together."""
    t = valid.shape[1]
    return padding_mask(valid, valid) & causal_mask(t, t, valid.device)  # (B, 1, T_out, T_out)


@dataclass
class EncoderDecoder:
    encoder: torch.Tensor  # (B, 1, T_in, T_in) weights
    decoder: torch.Tensor  # (B, 1, T_out, T_out)
    cross: torch.Tensor  # (B, 1, T_out, T_in)
    encoder_mask: torch.Tensor  # (B, 1, T_in, T_in)
    decoder_mask: torch.Tensor  # (B, 1, T_out, T_out)
    cross_mask: torch.Tensor  # (B, 1, T_out, T_in)


def encoder_decoder(
    source: torch.Tensor, valid_in: torch.Tensor, target: torch.Tensor, valid_out: torch.Tensor, scoring: str = "scaled_dot"
) -> EncoderDecoder:
    """One encoder self-attention, one causal decoder self-attention, one cross-attention (identity projections).

    The memory is the encoder's output, as in the notes; the decoder's queries are its own output.
    """
    enc_mask = padding_mask(valid_in, valid_in)  # (B, 1, T_in, T_in)
    dec_mask = decoder_mask(valid_out)  # (B, 1, T_out, T_out)
    x_mask = padding_mask(valid_out, valid_in)  # (B, 1, T_out, T_in)
    src, tgt = source[:, None], target[:, None]  # (B, 1, T, d): one head
    encoded = attend(src, src, src, scoring=scoring, mask=enc_mask)
    decoded = attend(tgt, tgt, tgt, scoring=scoring, mask=dec_mask)
    memory = encoded.output  # (B, 1, T_in, d)
    cross = attend(decoded.output, memory, memory, scoring=scoring, mask=x_mask)
    return EncoderDecoder(encoded.weights, decoded.weights, cross.weights, enc_mask, dec_mask, x_mask)


def alignment(weights: np.ndarray, source_tokens: list[str], k: int = 3) -> list[dict]:
    """For each target row of cross weights (T_out, T_in): its top-k source words as (position, word, weight),
    and its entropy (nats). Ties go to the earlier word."""
    rows_entropy = entropy(torch.as_tensor(weights)).numpy()  # (T_out,)
    out = []
    for row, h in zip(weights, rows_entropy):
        top = np.argsort(-row, kind="stable")[:k]
        out.append({"top": [(int(j), source_tokens[j], float(row[j])) for j in top], "entropy": float(h)})
    return out


def bmm_items(q: torch.Tensor, k: torch.Tensor) -> list[torch.Tensor]:
    """The batch product one item at a time: [Q_1 K_1, …, Q_n K_n], each (a, c), as in our notes."""
    return [q[i] @ k[i] for i in range(q.shape[0])]  # n × (a, b)(b, c) -> (a, c)


# ---------------------------------------------------------------- layers and rollout


def layer_stack(x: torch.Tensor, layers: int, *, mode: str = "identity", seed: int = 0) -> list[torch.Tensor]:
    """Self-attention weights (n, n) of each of `layers` post-norm layers: h ← LayerNorm(h + Attention(h)).

    Random mode draws seeded Xavier projections per layer with d_k = d_model, so the residual adds up.
    """
    d_model = x.shape[-1]
    h, weights = x, []  # (n, d)
    for layer in range(layers):
        projections = make_projections(d_model, mode=mode, d_k=d_model, seed=seed + layer)
        result = multi_head(h, h, projections)
        weights.append(result.attention.weights[0])  # (n, n)
        h = F.layer_norm(h + result.output, (d_model,))  # (n, d)
    return weights


def rollout(weights: list[torch.Tensor], residual: float = 0.5) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema): Ã_l = (1−r)·A_l + r·I, and R = Ã_L ··· Ã_2 Ã_1."""
    n = weights[0].shape[-1]
    eye = torch.eye(n, dtype=weights[0].dtype)
    result = eye  # (n, n)
    for a in weights:
        result = ((1 - residual) * a + residual * eye) @ result  # (n, n)
    return result
