"""Running the engine: the layers over a text (forward), several texts in one padded pass (batch_weights), one more
piece from the K/V cache (extend), and the logits; results computed on a GPU are copied into pinned host buffers."""

from __future__ import annotations


import numpy as np
import torch

from attnviz.functional import cpu_threads
from attnviz.models.engine.layout import Architecture, Forward, Intervention, Trace, Weights
from attnviz.models.engine.attend import Whole
from attnviz.models.engine.one_layer import attention_input, embed, layer, project


def run_layers(arch: Architecture, weights: Weights, x: torch.Tensor | None, positions: torch.Tensor, *,
               start: int = 0, intervention: Intervention | None = None, before=None, last_row: int | None = None,
               cached=None, out=None, real: torch.Tensor | None = None, attention=None, trace: bool = True):
    """The one loop over a model's layers: x (..., m, d), the input to layer `start`, through that layer and every one
    after it, one at a time, each by the one layer body (one_layer.layer). Yields (index, x after the layer, what its
    attention gave, its Trace or None), so a caller keeps what it needs from each layer as it comes (a forward its
    weights, a K/V step its cache, the scan its summaries), or stops early.

    - `intervention` changes every layer, once, whichever attention runs; `before(index, x)`, where given, returns
      (x, intervention) for that layer instead (a batch that grows layer by layer: the staircase).
    - `cached(index)`: the layer's cached keys and values (..., KV, c, dh) of the pieces before these (a K/V step).
    - `out(index)`: where the layer's weights (H, m, m) are computed (a forward on the CPU), or None.
    - `real` (B, m): padded texts' real pieces (a batch of texts).
    - `attention(index)`: the layer's attention strategy where it is not the contract with every weight held
      (attend.Whole): the scan's, a block of queries at a time (scan.Blocked).
    - `trace`: whether each layer's Trace is kept (without one, a layer holds less: one_layer.layer).
    - `last_row`: the last layer computes that query row only (its keys and values over the rows up to it), which is
      all a caller reads there; its x holds rows 0 … last_row, the earlier ones as they came. Only for a causal
      pre-norm model, where no later row changes it."""
    for i in range(start, arch.layers):
        if before is not None:
            x, intervention = before(i, x)
        params = weights.layers[i]
        if i == arch.layers - 1 and last_row is not None and arch.causal and not arch.post_norm:
            h = attention_input(arch, params, x[..., : last_row + 1, :])  # (..., r + 1, d)
            _, key, value = project(arch, params, h, positions[: last_row + 1], i)  # (..., KV, r + 1, dh) × 2
            y, a, kept = layer(arch, params, i, x[..., last_row: last_row + 1, :], positions[last_row: last_row + 1],
                               key[..., :last_row, :] if last_row else None, value[..., :last_row, :] if last_row else None,
                               intervention=intervention, trace=trace)  # (..., 1, d)
            yield i, torch.cat([x[..., :last_row, :], y], -2), a, kept  # (..., r + 1, d)
            return
        key, value = cached(i) if cached is not None else (None, None)  # (..., KV, c, dh) each, or None
        way = attention(i) if attention is not None else Whole(None if out is None else out(i), real)
        x, a, kept = layer(arch, params, i, x, positions, key, value, intervention=intervention, attention=way,
                           trace=trace)  # (..., m, d)
        yield i, x, a, kept
        del a, kept  # the caller's now: not held here while the next layer runs (a scan keeps no layer's αV)


def through(arch: Architecture, weights: Weights, x: torch.Tensor | None, positions: torch.Tensor, **how) -> torch.Tensor:
    """x after the last layer (run_layers, with its keyword arguments `how`)."""
    for _, x, _, _ in run_layers(arch, weights, x, positions, **how):
        pass
    return x


def forward(arch: Architecture, weights: Weights, ids: list[int], intervention: Intervention | None = None) -> Forward:
    """The whole model over `ids`, every layer's attention weights and traces kept; with `intervention`, as it changes
    the layers (the weights kept are those that met V)."""
    device = weights.embeddings.device
    cpu = torch.device("cpu")
    n = len(ids)
    attention = host_buffer((arch.layers, arch.heads, n, n), device)  # (L, H, n, n) filled layer by layer
    hidden = host_buffer((arch.layers + 1, n, arch.d_model), device)  # (L + 1, n, d)
    traces = []
    with torch.inference_mode():
        index = torch.tensor(ids, device=device)  # (n,)
        positions = torch.arange(n, device=device)  # (n,)
        x = embed(arch, weights, index, positions)  # (n, d)
        hidden[0].copy_(x, non_blocking=True)
        on_device = (lambda i: attention[i]) if device.type == "cpu" else None  # on a GPU: computed there, then copied
        for i, x, a, trace in run_layers(arch, weights, x, positions, intervention=intervention, out=on_device):
            if on_device is None or a.weights.data_ptr() != attention[i].data_ptr():
                attention[i].copy_(a.weights, non_blocking=True)  # (H, n, n)
            traces.append(trace.to(cpu, non_blocking=True))
            hidden[i + 1].copy_(x, non_blocking=True)
        next_logits = logits(weights, x[-1:])[0].float().cpu().numpy() if arch.causal else None  # (vocab,)
        copied(device)
    return Forward(hidden.numpy(), attention.numpy(), traces, next_logits, intervention=intervention)


def host_buffer(shape: tuple[int, ...], device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An empty CPU tensor that results computed on `device` are copied into. For a GPU it is page-locked (pinned), so
    each layer's copy is queued behind its arithmetic and the CPU goes on to the next layer: a copy into ordinary
    memory stops the CPU until the GPU is done, layer after layer (bench/bench_gpu.py)."""
    return torch.empty(shape, dtype=dtype, pin_memory=device.type == "cuda")


def to_host(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`tensor` copied into a host_buffer without waiting (then `copied` before it is read); on the CPU, itself."""
    if tensor.device.type == "cpu":
        return tensor if dtype is None else tensor.to(dtype)
    host = host_buffer(tuple(tensor.shape), tensor.device, dtype or tensor.dtype)
    return host.copy_(tensor, non_blocking=True)


def copied(device: torch.device) -> None:
    """Wait until the copies queued on `device` (non_blocking, into host buffers) have landed."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


def batch_weights(arch: Architecture, weights: Weights, batch: list[list[int]]) -> list[np.ndarray]:
    """Every layer's weights (L, H, n_b, n_b) float32 for each of several sequences, computed together in one forward:
    the sequences padded on the right to the longest, each key mask keeping a query off the padding. No hidden states,
    traces or logits are kept: this is the corpus pass of attnviz.heads. Each sequence's weights equal forward()'s."""
    device = weights.embeddings.device
    lengths = [len(ids) for ids in batch]
    n = max(lengths)
    fill = arch.padding_index if arch.padding_index is not None else 0
    padded = torch.full((len(batch), n), fill, dtype=torch.long)  # (B, n)
    for b, ids in enumerate(batch):
        padded[b, : len(ids)] = torch.tensor(ids)
    real = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).to(device)  # (B, n)
    attention = host_buffer((arch.layers, len(batch), arch.heads, n, n), device)  # (L, B, H, n, n)
    with torch.inference_mode():
        positions = torch.arange(n, device=device)  # (n,)
        x = embed(arch, weights, padded.to(device), positions)  # (B, n, d)
        for i, x, a, _ in run_layers(arch, weights, x, positions, real=real):
            attention[i].copy_(a.weights, non_blocking=True)  # (B, H, n, n)
        copied(device)
    return [attention[:, b, :, :k, :k].numpy() for b, k in enumerate(lengths)]  # (L, H, k, k) each


def logits(weights: Weights, hidden: torch.Tensor) -> torch.Tensor:
    """(m, vocab) next-piece logits from hidden states (m, d): the final norm, then the output matrix."""
    with torch.inference_mode():
        return unembed(weights, hidden)  # (m, vocab)


def unembed(weights: Weights, hidden: torch.Tensor) -> torch.Tensor:
    """logits() where autograd may follow (a gradient with respect to the input is taken through it)."""
    h = weights.final_norm(hidden) if weights.final_norm is not None else hidden  # (..., m, d)
    z = h @ weights.unembed  # (..., m, vocab)
    if weights.unembed_bias is not None:
        z = z + weights.unembed_bias  # (..., m, vocab)
    return z if weights.logit_cap is None else torch.tanh(z / weights.logit_cap) * weights.logit_cap


def extend(arch: Architecture, weights: Weights, before: Forward, token: int) -> Forward:
    """`before` with one more piece at its end, computed from its K/V cache (each layer's keys and values so far):
    the new piece's row of weights over every key, every earlier row as it was (causal attention lets none change).
    Equals forward() on the longer ids while only the new row is computed; under `before`'s intervention, as that
    intervention changes the new row (one that needs every position at once, a mean over them, says so). One query
    row is small work: on the CPU it runs on one thread (attention.cpu_threads), as fast as two on an idle machine
    (100 ms for SmolLM2 at 64 pieces either way), and it leaves the other core to the browser or another session,
    where two threads waiting on each other took twice as long (bench_models.py --next-word)."""
    intervention = before.intervention
    device = weights.embeddings.device
    n = before.weights.shape[-1]
    with torch.inference_mode(), cpu_threads(1, device):
        position = torch.tensor([n], device=device)  # (1,)
        x = embed(arch, weights, torch.tensor([token], device=device), position)  # (1, d)
        hidden, rows, traces = [x.float().cpu()], [], []
        cache = lambda i: (before.traces[i].key.to(device), before.traces[i].value.to(device))  # noqa: E731
        for i, x, a, new in run_layers(arch, weights, x, position, cached=cache, intervention=intervention):
            trace = before.traces[i]
            rows.append(a.weights.float().cpu())  # (H, 1, n + 1)
            traces.append(Trace(torch.cat([trace.x, new.x.cpu()]), torch.cat([trace.query, new.query.cpu()], 1),
                                new.key.cpu(), new.value.cpu(), torch.cat([trace.head_output, new.head_output.cpu()], 1),
                                *(torch.cat([old, fresh.cpu()]) for old, fresh in
                                  ((trace.attention_out, new.attention_out), (trace.middle, new.middle),
                                   (trace.mlp_out, new.mlp_out)))))
            hidden.append(x.float().cpu())
        next_logits = logits(weights, x)[0].float().cpu().numpy()  # (vocab,)
    old = np.pad(before.weights, ((0, 0), (0, 0), (0, 0), (0, 1)))  # (L, H, n, n + 1): no earlier row sees the new key
    grown = np.concatenate([old, torch.stack(rows).numpy()], 2)  # (L, H, n + 1, n + 1)
    return Forward(np.concatenate([before.hidden, torch.stack(hidden).numpy()], 1), grown, traces, next_logits,
                   intervention=intervention)
