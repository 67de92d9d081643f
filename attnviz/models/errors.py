"""What a model cannot do, in words for people: ModelError, and the families attnviz's engine computes, which the
messages name (ENGINE_FAMILIES)."""

from __future__ import annotations


class ModelError(ValueError):
    """A model that cannot be read or run, with what to do about it in words."""


ENGINE_FAMILIES = ("BERT-like (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA), ModernBERT, DeBERTa-v2 and -v3, GPT-2, "
                   "GPT-BigCode, Llama-like (Llama, Mistral, Qwen2, Qwen3, Phi-3, SmolLM3, OLMo 2, Granite, Mixtral, "
                   "Qwen3-MoE), Gemma (1, 2, 3), Phi, StableLM, BLOOM, OPT, GPT-NeoX and gpt-oss models")


def a_or_an(word: str) -> str:
    """The word with its article: "an encoder", "a decoder"."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"
