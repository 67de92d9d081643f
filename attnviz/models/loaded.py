"""A loaded model, whoever computes it: `Model` says what it is (kind, layers, heads, dtype, memory) and runs it on a
text; `EngineModel` is a model whose every layer attnviz's engine computes (attnviz.models.engine)."""

from __future__ import annotations

import math

import numpy as np
import torch

from attnviz._deprecated import renamed
from attnviz.models import engine
from attnviz.models.engine import rules
from attnviz.models.errors import ENGINE_FAMILIES, ModelError
from attnviz.models.files import size_text
from attnviz.models.generate import generate
from attnviz.models.pieces import Pieces, Reader
from attnviz.models.result import KIND_TITLES, Attention, Run
from attnviz.models.scan import BLOCK, STRONGEST

MAX_PIECES = 512  # the most a run reads (the models' own contexts are longer; a page's request stays bounded)
RUN_WEIGHTS_BYTES = 320 * 2**20  # a run's weights (L, H, n, n) float32 stay within this: many heads read fewer pieces
KINDS = ("encoder", "decoder", "encoder-decoder")


def max_pieces(layers: int, heads: int, context: int) -> int:
    """The most pieces a run of a model with `layers` × `heads` reads: MAX_PIECES, the model's context, and as many as
    keep its weights within RUN_WEIGHTS_BYTES (1,024 heads read 286 pieces; SmolLM2's 270 read 512)."""
    by_memory = int(math.sqrt(RUN_WEIGHTS_BYTES / (4 * layers * heads)))
    return max(2, min(MAX_PIECES, context, by_memory))


class Model:
    """What every loaded model tells and does. Subclasses set the fields and implement run()."""

    name: str  # as the app and links name it
    source: str  # the folder, the file, or the built-in name it came from
    kind: str  # one of KINDS
    family: str  # the mapping that read it ("bert", "gpt2", "llama"), or the config's model_type
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    d_model: int
    dtype: torch.dtype  # what the weights are computed in
    stored_dtype: torch.dtype  # what the file stores them as
    nbytes: int  # the weights' memory
    computed_by: str  # "attnviz" or "transformers"
    device: torch.device
    reader: Reader
    positions: str  # "learned", "rotary", or what transformers' model uses
    note: str = ""  # why a model of a family attnviz reads is computed by transformers

    @property
    def tokenizer(self):
        return self.reader.tokenizer

    @property
    def max_pieces(self) -> int:
        return self.reader.max_pieces

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    def tokenize(self, text: str) -> Pieces:
        return self.reader(text)

    can_intervene = False  # a run can be changed inside (attnviz.effects), its layers' Q, K, V and αV at hand
    can_scan = False  # model.scan reads a whole document, block by block
    notes: list[str] = []  # a sentence for each mechanism that changes what its pictures mean (engine.notes)
    can_generate = False  # model.generate writes after a text

    def run(self, text: str, target: str | None = None, intervention: engine.Intervention | None = None) -> Run:
        """The run on `text`: run_pieces on its pieces."""
        return self.run_pieces(self.tokenize(text), target=target, intervention=intervention)

    def run_pieces(self, pieces: Pieces, *, target: str | None = None,
                   intervention: engine.Intervention | None = None) -> Run:
        """The run on `pieces` (read from a text, or made by hand: a probe of random pieces). `target`: an
        encoder–decoder's target text (its own output when None); a decoder or an encoder reads none. `intervention`
        (attnviz.effects makes them): the run as it changes the layers, where can_intervene."""
        raise NotImplementedError

    def generate(self, text: str, steps: int = 16, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int = 0):
        """`steps` pieces written after `text` (attnviz.models.generate), where can_generate: by a decoder attnviz
        computes, from its K/V cache; by an encoder–decoder, after the source `text`."""
        return generate(self, text, steps, temperature, top_k, top_p, seed)

    def scan(self, text: str, block: int = BLOCK, strongest: int = STRONGEST, progress=None, limit: int | None = None,
             **old):
        """Every head's attention over a whole document, up to the model's own context (attnviz.models.scan): a
        model attnviz's engine computes only."""
        raise self._no_scan()

    def census(self, text: str, rules=None, wu=None, progress=None, limit: int | None = None):
        """What each head does over a whole document (EngineModel.census); a model attnviz does not compute has no
        scan to take it from."""
        raise self._no_scan()

    def _no_scan(self) -> ModelError:
        return ModelError(f"{self.name} is computed by transformers, which keeps every layer's n × n weights at once; "
                          f"a scan of a whole document needs a model attnviz's engine computes ({ENGINE_FAMILIES}).")

    # What the app asks of a model's attention, so that it never reads the engine's layout. A model transformers
    # computes answers with what it is known to do; attnviz's engine answers from its architecture and weights.

    @property
    def causal(self) -> bool:
        """Each piece reads only itself and the pieces before it."""
        return self.kind == "decoder"

    @property
    def context(self) -> int:
        """The most pieces the model reads: its own context where attnviz's engine computes it, else the most a run
        reads here (max_pieces)."""
        return self.max_pieces

    has_sinks = False  # its heads have learned sinks, so a row of weights sums to less than 1

    def window(self, layer: int) -> int | None:
        """Layer `layer`'s (from 0) sliding window, where it has one."""
        return None

    def sink(self, layer: int, head: int) -> float | None:
        """Head `head` of layer `layer`'s (from 0) learned sink logit, where the model's heads have one."""
        return None

    def drawn_scores(self, run: Run, layer: int, head: int, keys: list[str], kind: str | None = None
                     ) -> tuple[np.ndarray, list[str], float | None]:
        """Head `head` of layer `layer`'s (from 0) scores in `run` (Tq, Tk) as a heatmap draws them, with their `keys`'
        labels, and its learned sink's logit or None: where the head has a sink, its logit is one more column that
        every row reads (engine.rules.Sink.column), so the browser's softmax gives the model's weights and the
        sink's share beside them."""
        sink = self.sink(layer, head) if kind in (None, "self") else None
        return (*rules.Sink.column(run.head_scores(layer, head, kind), keys, sink), sink)

    def scan_limit(self, bound, free: int | None = None) -> int:
        """The most pieces (up to the context) a scan reads under `bound` (attnviz.models.scan.ScanBound)."""
        raise self._no_scan()

    def score_steps(self, trace, head: int, query: int, key: int, parts):
        """The neuron view's Parts of one score, q·k/√d_k taken apart (`parts`), with the family's own steps after it
        (DeBERTa's relative terms, ALiBi, a soft cap): none here."""
        return parts

    def alibi_slopes(self) -> np.ndarray | None:
        """(H,) each head's ALiBi slope m_h, where the model adds −m_h (i − j) to its scores."""
        return None

    def allowed(self, n: int, layer: int | None = None, kind: str | None = None) -> np.ndarray | None:
        """(n, n) which keys each of n queries may read (engine.rules.Keys, the one owner of that rule): a decoder's
        causal mask, and layer `layer`'s (from 0) window where it has one; None where every query reads every key.
        `kind`: one of a run's kinds of attention, where the model has several (an encoder–decoder's "decoder" reads
        causally, its "encoder" and "cross" every key)."""
        return rules.Keys(self.causal if kind in (None, "self") else kind == "decoder").matrix(n)

    def score_formula(self) -> str:
        """A score a_ij as the model computes it, in LaTeX, before the mask and the softmax."""
        return r"a_{ij} = \frac{q_i \cdot k_j}{\sqrt{%d}}" % self.head_dim

    def relative_distances(self, n: int) -> tuple[np.ndarray, int, int | None] | None:
        """DeBERTa's positions: the bucketed distance δ(i, j) (n, n) each score reads, its reach k (δ in −k … k − 1),
        and the distance past which buckets are log-spaced (None: every distance is its own)."""
        return None

    def position_table(self, n: int) -> np.ndarray | None:
        """(n, d) the learned rows added to the first n pieces' embeddings, where the model has them."""
        return None

    def rotary(self) -> tuple[int, object] | None:
        """Under RoPE: the dimensions of each head it turns, and its base (a number, or a Rope that stretches it)."""
        return None

    def describe(self) -> str:
        """One line for people: what the model is and what computes it."""
        heads = f"{self.heads} heads" + (f" sharing {self.kv_heads} key/value heads" if self.kv_heads != self.heads else "")
        dtype = str(self.dtype).removeprefix("torch.")
        stored = str(self.stored_dtype).removeprefix("torch.")
        held = dtype if stored == dtype else f"{dtype} (stored as {stored})"
        return (f"{self.kind}, {self.layers} layers × {heads}, d_model = {self.d_model}, d_k = {self.head_dim}; "
                f"weights {held}, {size_text(self.nbytes)} on {self.device.type}; computed by {self.computed_by}")

    def __repr__(self) -> str:
        return f"<attnviz model {self.name!r}: {self.describe()}>"


class EngineModel(Model):
    """A model computed by attnviz's engine from weights mapped into its layout."""

    computed_by = "attnviz"
    can_intervene = can_scan = True

    def __init__(self, name: str, source: str, arch: engine.Architecture, weights: engine.Weights, tokenizer,
                 stored_dtype: torch.dtype, dtype: torch.dtype, end_ids: tuple[int, ...] = ()):
        self.name, self.source, self.arch, self.weights = name, source, arch, weights
        self.kind, self.family = arch.kind, arch.family
        self.layers, self.heads, self.kv_heads, self.head_dim, self.d_model = (
            arch.layers, arch.heads, arch.kv_heads, arch.head_dim, arch.d_model)
        self.stored_dtype, self.dtype = stored_dtype, dtype
        self.device = weights.embeddings.device
        self.nbytes = weights.nbytes
        self.positions = arch.positions
        limit = max_pieces(arch.layers, arch.heads, arch.context)
        self.reader = Reader(tokenizer, limit, name)
        self.end_ids = end_ids  # a decoder's end-of-text pieces: writing stops at them
        self.can_generate = arch.kind == "decoder"  # from its K/V cache

    @property
    def notes(self) -> list[str]:
        """A sentence for each mechanism that changes what its pictures mean (engine.notes)."""
        return engine.notes(self.arch, self.weights)

    @property
    def causal(self) -> bool:
        return self.arch.causal

    @property
    def context(self) -> int:
        return self.arch.context

    @property
    def has_sinks(self) -> bool:
        return self.arch.sinks

    def window(self, layer: int) -> int | None:
        return rules.keys(self.arch, layer).window

    def sink(self, layer: int, head: int) -> float | None:
        sink = self.weights.layers[layer].sink if self.arch.sinks else None  # (H,) or None
        return None if sink is None else float(sink[head])

    def scan_limit(self, bound, free: int | None = None) -> int:
        """The most pieces a scan reads under `bound` (attnviz.models.scan.ScanBound), `free` the bytes the machine
        had free when the server started."""
        return bound.pieces(self.arch, free)

    def score_steps(self, trace, head: int, query: int, key: int, parts):
        relative = engine.relative_parts(self.arch, trace, head, query, key, parts)
        return engine.shaped_parts(self.arch, head, query, key, relative)

    def alibi_slopes(self) -> np.ndarray | None:
        return rules.alibi_slopes(self.heads).numpy() if self.arch.alibi else None  # (H,)

    def allowed(self, n: int, layer: int | None = None, kind: str | None = None) -> np.ndarray | None:
        return (rules.keys(self.arch, layer) if layer is not None else rules.Keys(self.arch.causal)).matrix(n)

    def score_formula(self) -> str:
        relative, root = rules.relative(self.arch), r"\sqrt{%d}" % self.head_dim
        content = relative.latex(root) if relative else r"\frac{q_i \cdot k_j}{%s}" % root
        return "a_{ij} = " + rules.shaped_latex(self.arch, content)

    def relative_distances(self, n: int) -> tuple[np.ndarray, int, int | None] | None:
        span = self.arch.relative_span
        if not span:
            return None
        where = torch.arange(n)  # (n,)
        distance = (engine.relative_index(self.arch, where, where) - span).numpy().astype(np.float32)  # (n, n)
        buckets = self.arch.relative_buckets
        return distance, span, (buckets // 2 if buckets > 0 else None)

    def position_table(self, n: int) -> np.ndarray | None:
        if self.weights.positions is None:
            return None
        return self.weights.positions[self.arch.position_rows(n)].float().cpu().numpy()  # (n, d)

    def rotary(self) -> tuple[int, object] | None:
        if self.arch.positions != "rotary":
            return None
        return self.arch.rotary_dims or self.head_dim, self.arch.rope_base

    def run_pieces(self, pieces: Pieces, *, target: str | None = None,
                   intervention: engine.Intervention | None = None) -> Run:
        return self._run(pieces, engine.forward(self.arch, self.weights, pieces.ids, intervention))

    def scan(self, text: str, block: int = BLOCK, strongest: int = STRONGEST, progress=None, limit: int | None = None,
             **old):
        """Every head's attention over `text`, up to the model's own context (arch.context pieces, or `limit` where
        that is smaller: a server's bound), summarised block by block without the full matrix
        (attnviz.models.scan.Scan), each query's `strongest` keys kept. `progress(done, total)` hears of each block
        of queries of each layer. A text over the context, or an empty one, gets a TextError that says why. The door
        of a scan: its sizes are checked here, once."""
        from attnviz.models import scan as scanning  # noqa: F811  the module, beside the method of the same name

        strongest = renamed(old, "top", "strongest", strongest, "model.scan")
        if isinstance(block, bool) or not isinstance(block, int) or not 16 <= block <= 4096:
            raise ValueError(f"block must be a whole number from 16 to 4,096, got {block!r}.")
        if isinstance(strongest, bool) or not isinstance(strongest, int) or not 1 <= strongest <= 64:
            raise ValueError(f"strongest (the keys kept a query) must be a whole number from 1 to 64, got {strongest!r}.")
        pieces = self.reader(text, limit=min(self.arch.context, limit or self.arch.context))
        return scanning.scan(self.arch, self.weights, pieces, self.name, block=block, strongest=strongest,
                             progress=progress)

    def census(self, text: str, rules=None, wu=None, progress=None, limit: int | None = None):
        """What each head does over `text` (attnviz.models.census.Census): its scan, then the census of its one
        pass. `rules`: a census.Rules; `wu` (L, H): the needle lab's retrieval scores, where it ran."""
        from attnviz.models import census as counting

        return counting.census(self.scan(text, progress=progress, limit=limit), rules or counting.Rules(), wu)

    def batch_weights(self, batch: list[Pieces]) -> list[np.ndarray]:
        """Every layer's weights (L, H, n, n) of each of several texts' pieces, computed in one padded forward."""
        return engine.batch_weights(self.arch, self.weights, [pieces.ids for pieces in batch])

    def _run(self, pieces: Pieces, result: engine.Forward) -> Run:
        attention = Attention("self", KIND_TITLES["self"], result.weights, pieces, pieces, self.arch.causal)
        return Run(self.name, self.kind, self.computed_by, pieces, {"self": attention}, result.hidden, result.traces,
                   result.next_logits, self.arch, intervention=result.intervention)

    # ------------------------------------------------------------ decoders

    def extend(self, run: Run, token: int) -> Run:
        """`run` with `token` appended, from its K/V cache: only the new piece's row is computed (engine.extend)."""
        if not self.arch.causal:
            raise ValueError("Only a decoder reads one more piece from its cache.")
        if getattr(run.intervention, "whole_sequence", False):
            raise ValueError(f"{run.intervention.describe()}: it needs every position at once, so the run cannot grow "
                             "one piece at a time; run the longer text whole.")
        before = engine.Forward(run.hidden, run.weights, run.traces, run.next_logits, intervention=run.intervention)
        return self._run(self.reader.append(run.pieces, token), engine.extend(self.arch, self.weights, before, token))

    def logits(self, run: Run) -> np.ndarray:
        """(n, vocab) float32: a decoder's next-piece logits at every position of `run`, from its last hidden states."""
        hidden = torch.from_numpy(run.hidden[-1]).to(self.device, self.dtype)  # (n, d)
        return engine.logits(self.weights, hidden).float().cpu().numpy()  # (n, vocab)

    def logit_lens(self, hidden: np.ndarray, top: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """What each layer's hidden state (L + 1, n, d) would predict next, read through the final norm and the output
        matrix: the `top` piece ids (L + 1, n, top) and their probabilities (L + 1, n, top). One layer at a time, so
        only (n, vocab) logits are ever held."""
        ids, probs = [], []
        for states in torch.from_numpy(hidden).to(self.device, self.dtype):  # (n, d) each
            p = torch.softmax(engine.logits(self.weights, states).float(), -1)  # (n, vocab)
            best = torch.topk(p, top, dim=-1)  # (n, top)
            ids.append(best.indices.cpu())
            probs.append(best.values.cpu())
        return torch.stack(ids).numpy(), torch.stack(probs).numpy()

    @property
    def has_lens(self) -> bool:
        return self.arch.causal and self.weights.unembed is not None
