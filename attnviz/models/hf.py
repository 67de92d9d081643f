"""Any other architecture transformers can load, computed by transformers: eager attention with output_attentions, so
each head's weights are the model's own. Encoder–decoders (T5, BART, Marian) give their three kinds of attention.

Nothing here runs a checkpoint's own code (trust_remote_code stays off) or reads a pickle (use_safetensors=True).
Such a run keeps no queries or keys, so its scores are ln α (attnviz.models.result.log_scores), and the views that need the
engine's inside (a score taken apart, the step-by-step walk, the query–key space, the logit lens) say so.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import torch

from attnviz.models import engine
from attnviz.models.errors import ENGINE_FAMILIES, ModelError
from attnviz.models.loaded import Model, max_pieces
from attnviz.models.pieces import Pieces, Reader
from attnviz.models.result import KIND_TITLES, Attention, Run

TARGET_PIECES = 32  # an encoder–decoder's own output, when no target is given, is at most this many pieces
DECODER_ARCHITECTURES = ("ForCausalLM", "LMHeadModel")


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder only: nothing is fetched, ever
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@contextlib.contextmanager
def _quiet():
    """transformers' loading without its progress bars and config warnings (a notebook cell shows them as noise); what
    went wrong still comes back as an exception, turned into a ModelError."""
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def _config(folder: Path):
    _offline()
    try:
        from transformers import AutoConfig
    except ImportError:
        raise ModelError("This architecture is computed by transformers, which is not installed: pip install "
                         "transformers") from None
    try:
        with _quiet():
            return AutoConfig.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except ValueError as error:
        if "trust_remote_code" in str(error):
            raise ModelError(f"{folder.name} needs its own Python code to run (trust_remote_code), which attnviz never "
                             "runs.") from None
        raise ModelError(f"{folder.name}: transformers cannot read its config.json ({error}).") from None
    except (KeyError, OSError) as error:
        raise ModelError(f"{folder.name}: transformers cannot read its config.json ({error}).") from None


def known(model_type: str) -> bool:
    """Whether transformers knows this model_type."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except ImportError:
        return False
    return model_type in CONFIG_MAPPING


def kind_of(config) -> str:
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    if any(a.endswith(DECODER_ARCHITECTURES) for a in getattr(config, "architectures", None) or []):
        return "decoder"
    return "encoder"


def _context(config) -> int:
    for name in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return 512


class TransformersModel(Model):
    computed_by = "transformers"
    positions = "the model's own (computed by transformers)"

    def __init__(self, name: str, folder: Path, tokenizer, device: torch.device, dtype: torch.dtype,
                 stored_dtype: torch.dtype, note: str = ""):
        config = _config(folder)
        self.name, self.source, self.note = name, str(folder), note
        self.kind, self.family = kind_of(config), config.model_type
        self.can_generate = self.kind == "encoder-decoder"  # writes after the source text
        self.device, self.dtype, self.stored_dtype = device, dtype, stored_dtype
        self.module = self._load(folder, config)
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        self.layers = getattr(text, "num_hidden_layers", None) or getattr(text, "num_layers", None) or 0
        self.heads = getattr(text, "num_attention_heads", None) or getattr(text, "num_heads", None) or 0
        self.kv_heads = getattr(text, "num_key_value_heads", None) or self.heads
        self.d_model = getattr(text, "hidden_size", None) or getattr(text, "d_model", None) or 0
        self.head_dim = getattr(text, "head_dim", None) or getattr(text, "d_kv", None) or (self.d_model // max(self.heads, 1))
        self.decoder_layers = getattr(text, "num_decoder_layers", None) or getattr(text, "decoder_layers", None) or self.layers
        params = list(self.module.parameters()) + list(self.module.buffers())
        self.nbytes = sum(p.numel() * p.element_size() for p in {p.data_ptr(): p for p in params}.values())
        self.start = getattr(config, "decoder_start_token_id", None)
        self.reader = Reader(tokenizer, max_pieces(max(self.layers, self.decoder_layers, 1), max(self.heads, 1),
                                                   _context(text)), name)

    def _load(self, folder: Path, config):
        from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

        auto = {"encoder-decoder": AutoModelForSeq2SeqLM, "decoder": AutoModelForCausalLM}.get(self.kind, AutoModel)
        try:
            with _quiet():
                module, info = auto.from_pretrained(
                    str(folder), config=config, attn_implementation="eager", use_safetensors=True,
                    local_files_only=True, trust_remote_code=False, dtype=self.dtype, output_loading_info=True)
        except (OSError, ValueError, RuntimeError, KeyError, TypeError, ArithmeticError) as error:
            raise ModelError(f"transformers cannot load {folder.name} ({type(error).__name__}: {error}).") from None
        problems = [f"{what}: {', '.join(map(str, keys[:3]))}" for what, keys in
                    (("missing", info.get("missing_keys") or []), ("of the wrong shape", info.get("mismatched_keys") or []))
                    if keys]
        if problems:
            raise ModelError(f"{folder.name}'s weights do not match its config.json (weights {'; '.join(problems)}).")
        return module.to(self.device).eval()

    def run_pieces(self, pieces: Pieces, *, target: str | None = None,
                   intervention: engine.Intervention | None = None) -> Run:
        if intervention is not None:
            raise ModelError(f"{self.name} is computed by transformers, which keeps no seam inside its layers: "
                             "interventions (ablating a head, knocking out an edge) need attnviz's own engine, which "
                             f"computes {ENGINE_FAMILIES}.")
        if self.kind == "encoder-decoder":
            return self._run_seq2seq(pieces, target)
        ids = torch.tensor([pieces.ids], device=self.device)  # (1, n)
        with torch.inference_mode():
            out = self.module(input_ids=ids, output_attentions=True, output_hidden_states=True)
        weights = _stack(out.attentions, self.name)  # (L, H, n, n)
        hidden = torch.stack([h[0].float().cpu() for h in out.hidden_states]).numpy() if out.hidden_states else None
        logits = out.logits[0, -1].float().cpu().numpy() if self.kind == "decoder" else None  # (vocab,)
        attention = Attention("self", KIND_TITLES["self"], weights, pieces, pieces, self.kind == "decoder")
        return Run(self.name, self.kind, self.computed_by, pieces, {"self": attention}, hidden, None, logits)

    def _target_ids(self, source: torch.Tensor, target: str | None) -> list[int]:
        """The decoder's input: [start] + the target's pieces, or the model's own greedy output for the source."""
        end = getattr(self.module.config, "eos_token_id", None)
        if target is not None and target.strip():
            ids = [i for i in self.tokenizer.encode(target).ids if i != end]
            return [self.start] + ids[: TARGET_PIECES]
        with torch.inference_mode():
            made = self.module.generate(input_ids=source, max_new_tokens=TARGET_PIECES, do_sample=False, num_beams=1,
                                        use_cache=False)  # a cache sized by the encoder's layers breaks T5 with others
        ids = made[0].tolist()
        return ids[:-1] if len(ids) > 1 and ids[-1] == end else ids  # the end piece is predicted, never read

    # ------------------------------------------------------------ writing (attnviz.models.generate)

    @property
    def end_ids(self) -> tuple[int, ...]:
        end = getattr(self.module.config, "eos_token_id", None)
        return tuple(end) if isinstance(end, (list, tuple)) else () if end is None else (int(end),)

    def encode(self, pieces: Pieces):
        """The encoder's output over the source pieces, read once for every step of a generation."""
        with torch.inference_mode():
            return self.module.get_encoder()(input_ids=torch.tensor([pieces.ids], device=self.device))

    def next_logits(self, encoded, ids: list[int]) -> torch.Tensor:
        """(vocab,) the decoder's next-piece logits after its pieces `ids` ([start] + those written), against the
        encoder's output."""
        with torch.inference_mode():
            out = self.module(encoder_outputs=encoded, decoder_input_ids=torch.tensor([ids], device=self.device))
        return out.logits[0, -1].float().cpu().clone()  # (vocab,): a copy, as a view keeps the whole (1, t, vocab)

    def run_target(self, pieces: Pieces, ids: list[int]) -> Run:
        """The run of the source `pieces` with the decoder reading `ids`: encoder, decoder and cross-attention."""
        return self._run_seq2seq(pieces, None, ids)

    def _run_seq2seq(self, pieces: Pieces, target: str | None, ids: list[int] | None = None) -> Run:
        source = torch.tensor([pieces.ids], device=self.device)  # (1, n)
        ids = self._target_ids(source, target) if ids is None else ids
        with torch.inference_mode():
            out = self.module(input_ids=source, decoder_input_ids=torch.tensor([ids], device=self.device),
                              output_attentions=True)
        labels = self.reader.labels(ids)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        spans = [(0, 0)] * len(ids)
        special = [i == self.start for i in ids]
        tokens = [self.tokenizer.id_to_token(i) or "" for i in ids]
        targets = Pieces(tokens, ids, [None if s else k for k, s in enumerate(special)], spans, text, special,
                         [False] * len(ids), labels)
        kinds = {
            "encoder": Attention("encoder", KIND_TITLES["encoder"], _stack(out.encoder_attentions, self.name), pieces,
                                 pieces, False),
            "decoder": Attention("decoder", KIND_TITLES["decoder"], _stack(out.decoder_attentions, self.name), targets,
                                 targets, True),
            "cross": Attention("cross", KIND_TITLES["cross"], _stack(out.cross_attentions, self.name), targets, pieces,
                               False),
        }
        return Run(self.name, self.kind, self.computed_by, pieces, kinds)


def _stack(attentions, name: str) -> np.ndarray:
    """transformers' per-layer (1, H, Tq, Tk) attentions as one float32 (L, H, Tq, Tk)."""
    if not attentions or any(a is None for a in attentions):
        raise ModelError(f"{name} gives no attention weights through transformers (its eager attention returns none).")
    try:
        return torch.stack([a[0].float().cpu() for a in attentions]).numpy()
    except RuntimeError:
        raise ModelError(f"{name}'s layers have different numbers of heads, which attnviz does not draw.") from None
