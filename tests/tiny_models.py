"""Tiny random models of every family, built from transformers' config classes and saved with save_pretrained into a
folder, each with a tokenizer trained here: what the tests point attnviz at as "your own model". Odd shapes on purpose:
3 heads, 4 query heads per key/value head, head sizes that are not d_model / heads, RoPE bases other than 10,000,
biases on, sliding windows shorter than the sentences."""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    "When he saw his owner, the dog was happy, so he wagged his tail.",
    "The cat watched from the top of the old red sofa by the window.",
    "A query looks at every key and takes a weighted mix of the values.",
    "Attention is all you need, they said; the dog did not listen.",
    "Numbers like 3.5 and 42 and words like café, naïve and Zürich.",
]
SENTENCES = {
    "dog": "When he saw his owner, the dog was happy, so he wagged his tail",
    "cat": "The cat watched the dog from the sofa.",
    "unseen": "Quantum zebras juggle 17 marmalade pianos",
}


def wordpiece_tokenizer(folder: Path, *, roberta: bool = False) -> int:
    """A WordPiece tokenizer trained on CORPUS with [CLS] … [SEP] around each text (RoBERTa's <s> … </s>), saved as
    tokenizer.json; returns its vocabulary's size."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = ["<s>", "<pad>", "</s>", "<unk>"] if roberta else ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]  # RoBERTa: <pad> = 1
    first, last, unknown = (specials[0], specials[2], specials[3]) if roberta else (specials[2], specials[3], specials[1])
    tokenizer = Tokenizer(models.WordPiece(unk_token=unknown))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=120, special_tokens=specials))
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{first} $A {last}", special_tokens=[(first, tokenizer.token_to_id(first)), (last, tokenizer.token_to_id(last))])
    tokenizer.save(str(folder / "tokenizer.json"))
    return tokenizer.get_vocab_size()


def byte_level_tokenizer(folder: Path, *, bos: str | None = None) -> int:
    """A byte-level BPE tokenizer (GPT-2's kind) trained on CORPUS, optionally putting `bos` first; returns its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>"] + ([bos] if bos else [])
    tokenizer.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=320, special_tokens=specials,
                                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, tokenizer.token_to_id(bos))])
    tokenizer.save(str(folder / "tokenizer.json"))
    return tokenizer.get_vocab_size()


def _save(model, folder: Path, *, norms: bool = False, centre: float = 1.0, sinks: float = 0.0) -> Path:
    """`model` with random weights saved in `folder`; with `norms`, every norm's weight random too (centre + N(0, 0.1)),
    so that a norm the engine left out or put in the wrong place would show. Gemma's norms scale by 1 + w: centre 0.
    gpt-oss's learned sinks are N(`sinks`, 1), so that they take a share that shows."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():  # larger than the init's 0.02, so that heads differ and softmax rows are far from flat
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.3)
            elif not (name.endswith(("norm.weight", "LayerNorm.weight", "ln_1.weight", "ln_2.weight", "ln_f.weight",
                                     "layer_norm.weight", "layernorm.weight")) or "layernorm.norms." in name):  # StableLM's
                # per-head q/k norms
                p.normal_(0, 0.1)
            elif norms:
                p.normal_(centre, 0.1)
            if name.endswith(".sinks"):
                p.normal_(sinks, 1.0)
    model.save_pretrained(str(folder))
    return folder


OUTSIDE = "gptj"  # a decoder family attnviz's engine does not compute: transformers does


def build(family: str, root: Path) -> Path:
    """A folder holding a tiny `family` model and its tokenizer: bert, roberta, distilbert, gpt2, llama, mistral, qwen2,
    qwen3, phi3, gpt_neox, opt and the others of ENGINE, gptj (OUTSIDE attnviz's families: computed by transformers), t5
    (an encoder–decoder)."""
    import torch
    import transformers as T

    torch.manual_seed(0)
    folder = root / family
    folder.mkdir(parents=True, exist_ok=True)
    if family in ("bert", "roberta", "xlm-roberta", "distilbert", "electra", "modernbert", "deberta-v2"):
        roberta = family in ("roberta", "xlm-roberta")
        vocab = wordpiece_tokenizer(folder, roberta=roberta)
        if family == "electra":  # embeddings of 16, widened to the layers' 24
            config = T.ElectraConfig(vocab_size=vocab, embedding_size=16, hidden_size=24, num_hidden_layers=2,
                                     num_attention_heads=3, intermediate_size=40, max_position_embeddings=80)
            return _save(T.ElectraModel(config), folder, norms=True)
        if family == "modernbert":  # local layers reading 3 pieces either side, two RoPE bases, biases on
            ends = {name: 2 for name in ("bos_token_id", "cls_token_id")} | {name: 3 for name in ("eos_token_id", "sep_token_id")}
            config = T.ModernBertConfig(vocab_size=vocab, hidden_size=24, num_hidden_layers=3, num_attention_heads=3,
                                        intermediate_size=40, max_position_embeddings=80, local_attention=6,
                                        pad_token_id=0, attention_bias=True, mlp_bias=True, norm_bias=True, **ends)
            return _save(T.ModernBertModel(config), folder, norms=True)
        if family == "deberta-v2":  # v3's shape: both relative terms, log buckets past 4 back, no absolute positions
            config = T.DebertaV2Config(vocab_size=vocab, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                                       intermediate_size=40, max_position_embeddings=80, relative_attention=True,
                                       pos_att_type=["p2c", "c2p"], position_buckets=8, max_relative_positions=40,
                                       position_biased_input=False, type_vocab_size=0, norm_rel_ebd="layer_norm",
                                       pad_token_id=0)
            return _save(T.DebertaV2Model(config), folder, norms=True)
        if family == "xlm-roberta":
            config = T.XLMRobertaConfig(vocab_size=vocab, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                                        intermediate_size=40, max_position_embeddings=80, pad_token_id=1)
            return _save(T.XLMRobertaModel(config, add_pooling_layer=False), folder, norms=True)
        if family == "distilbert":
            config = T.DistilBertConfig(vocab_size=vocab, dim=24, n_layers=2, n_heads=3, hidden_dim=40, pad_token_id=0)
            return _save(T.DistilBertModel(config), folder)
        kind = T.RobertaConfig if family == "roberta" else T.BertConfig
        config = kind(vocab_size=vocab, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
                      max_position_embeddings=80, pad_token_id=1 if family == "roberta" else 0)
        return _save((T.RobertaModel if family == "roberta" else T.BertModel)(config, add_pooling_layer=False), folder)
    if family == "gpt2":
        vocab = byte_level_tokenizer(folder)
        config = T.GPT2Config(vocab_size=vocab, n_embd=24, n_layer=2, n_head=3, n_positions=64, bos_token_id=0,
                              eos_token_id=0)
        return _save(T.GPT2LMHeadModel(config), folder)
    if family in LLAMA_LIKE:
        vocab = byte_level_tokenizer(folder, bos="<s>" if family == "llama" else None)
        shared = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2,
                      intermediate_size=40, max_position_embeddings=128, bos_token_id=None, eos_token_id=0,
                      pad_token_id=None)
        if family == "llama":
            config = T.LlamaConfig(**shared, head_dim=6, rope_theta=5000.0, attention_bias=True, mlp_bias=True,
                                   tie_word_embeddings=True)
            return _save(T.LlamaForCausalLM(config), folder)
        if family == "mistral":
            config = T.MistralConfig(**shared, rope_theta=777.0, sliding_window=4, tie_word_embeddings=False)
            return _save(T.MistralForCausalLM(config), folder)
        if family == "phi3":  # W_q, W_k, W_v fused, and W_gate, W_up; half of each head turned; a window
            config = T.Phi3Config(**shared, rope_parameters={"rope_type": "default", "rope_theta": 2345.0,
                                                             "partial_rotary_factor": 0.5},
                                  sliding_window=4, tie_word_embeddings=False)
            return _save(T.Phi3ForCausalLM(config), folder, norms=True)
        if family in NEW_DECODERS:  # the Llama-like ones
            return newer_decoder(family, folder, shared)
        if family == "qwen3":  # each head's query and key normed (q_norm, k_norm), head size not d_model / heads
            config = T.Qwen3Config(**shared, head_dim=6, rope_theta=4321.0, attention_bias=True, use_sliding_window=True,
                                   sliding_window=5, max_window_layers=2, tie_word_embeddings=False)
            return _save(T.Qwen3ForCausalLM(config), folder, norms=True)
        config = T.Qwen2Config(**shared, rope_theta=123456.0, use_sliding_window=True, sliding_window=5,
                               max_window_layers=1, tie_word_embeddings=False)
        return _save(T.Qwen2ForCausalLM(config), folder)
    if family in ("gpt_bigcode", "phi", "stablelm", "bloom"):
        return other_decoder(family, folder)
    if family == "gemma3":
        return gemma3_with_vision(folder)
    if family == "gpt_neox":  # Pythia's: a parallel residual, a quarter of each head turned by position
        vocab = byte_level_tokenizer(folder)
        config = T.GPTNeoXConfig(vocab_size=vocab, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                                 intermediate_size=40, max_position_embeddings=64, rotary_pct=0.25,
                                 rotary_emb_base=333.0, bos_token_id=0, eos_token_id=0)
        return _save(T.GPTNeoXForCausalLM(config), folder, norms=True)
    if family == "opt":  # embeddings of 16, widened to the layers' 24 (project_in) and narrowed back (project_out)
        vocab = byte_level_tokenizer(folder)
        config = T.OPTConfig(vocab_size=vocab, hidden_size=24, num_hidden_layers=2, ffn_dim=40, num_attention_heads=3,
                             max_position_embeddings=64, word_embed_proj_dim=16, bos_token_id=0, eos_token_id=0,
                             pad_token_id=1)
        return _save(T.OPTForCausalLM(config), folder, norms=True)
    if family == OUTSIDE:  # a family outside attnviz's engine: computed by transformers
        vocab = byte_level_tokenizer(folder)
        config = T.GPTJConfig(vocab_size=vocab, n_embd=24, n_layer=2, n_head=3, rotary_dim=4, n_positions=64,
                              bos_token_id=0, eos_token_id=0)
        return _save(T.GPTJForCausalLM(config), folder)
    if family == "t5":
        vocab = byte_level_tokenizer(folder)
        config = T.T5Config(vocab_size=vocab, d_model=24, d_kv=8, d_ff=40, num_layers=2, num_decoder_layers=3,
                            num_heads=3, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        return _save(T.T5ForConditionalGeneration(config), folder)
    raise ValueError(f"no tiny {family}")


def newer_decoder(family: str, folder: Path, shared: dict) -> Path:
    """A tiny decoder of a family with one of the engine's later mechanisms, each set where it shows: scales other than
    1/√dh, caps that bite at these weights' scores, windows shorter than the sentences, per-layer bases."""
    import transformers as T

    gemma = dict(shared, head_dim=6, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True)
    if family == "gemma":  # (1 + w) norms, √d embedding scale, GeGLU
        config, kind = T.GemmaConfig(**{**gemma, "hidden_act": "gelu_pytorch_tanh"}, rope_theta=999.0), T.GemmaForCausalLM
    elif family == "gemma2":  # pre- and post-norms, soft caps on the scores and the logits, alternating windows
        config = T.Gemma2Config(**gemma, query_pre_attn_scalar=20, attn_logit_softcapping=2.0,
                                final_logit_softcapping=3.0, sliding_window=4, rope_theta=555.0)
        kind = T.Gemma2ForCausalLM
    elif family == "gemma3_text":  # q/k norms, a RoPE base for its local layers and another for its global one
        config = T.Gemma3TextConfig(**gemma, query_pre_attn_scalar=10, sliding_window=4,
                                    layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                    rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 5555.0},
                                                     "sliding_attention": {"rope_type": "default", "rope_theta": 77.0}})
        kind = T.Gemma3ForCausalLM
    elif family == "olmo2":  # norms on the updates, none before; the whole query and key normed
        config, kind = T.Olmo2Config(**shared, rope_theta=3333.0, tie_word_embeddings=False), T.Olmo2ForCausalLM
    elif family == "smollm3":  # layer 1 without positions (and windowed)
        config = T.SmolLM3Config(**shared, no_rope_layers=[1, 0, 1], use_sliding_window=True, sliding_window=4,
                                 rope_theta=2222.0)
        kind = T.SmolLM3ForCausalLM
    elif family == "granite":  # every multiplier away from 1
        config = T.GraniteConfig(**shared, embedding_multiplier=3.0, attention_multiplier=0.1, residual_multiplier=0.5,
                                 logits_scaling=4.0, attention_bias=True, mlp_bias=True, tie_word_embeddings=True)
        kind = T.GraniteForCausalLM
    elif family == "mixtral":  # 4 experts, 2 per piece
        config = T.MixtralConfig(**shared, num_local_experts=4, num_experts_per_tok=2, rope_theta=4444.0,
                                 tie_word_embeddings=False)
        kind = T.MixtralForCausalLM
    elif family == "gpt_oss":  # learned sinks, YaRN, windows on layers 0 and 2, 4 clamped SwiGLU experts, 2 per piece
        config = T.GptOssConfig(**shared, head_dim=6, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
                                swiglu_limit=1.0, rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 3000.0,
                                                                   "original_max_position_embeddings": 8})
        kind = T.GptOssForCausalLM
    else:  # qwen3_moe: experts on layers 0 and 2, a dense MLP on layer 1, top-2 probabilities as they are
        config = T.Qwen3MoeConfig(**shared, head_dim=6, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=12,
                                  norm_topk_prob=False, mlp_only_layers=[1], rope_theta=6666.0,
                                  tie_word_embeddings=False)
        kind = T.Qwen3MoeForCausalLM
    return _save(kind(config), folder, norms=True, centre=0.0 if family.startswith("gemma") else 1.0, sinks=1.0)


def gemma3_with_vision(folder: Path) -> Path:
    """Gemma 3 as its 4B and larger ship: a vision tower beside the text model (model_type gemma3, text_config),
    here with Gemma 3's stretched RoPE on its global layer (linear, ×4), as those checkpoints have (×8)."""
    import transformers as T

    vocab = byte_level_tokenizer(folder)
    text = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2,
                head_dim=6, intermediate_size=40, max_position_embeddings=128, query_pre_attn_scalar=10, sliding_window=4,
                layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 5555.0},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 77.0}},
                hidden_activation="gelu_pytorch_tanh", bos_token_id=None, eos_token_id=0, pad_token_id=None)
    vision = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=20, image_size=28,
                  patch_size=14)
    config = T.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4, image_token_index=vocab - 1,
                            boi_token_index=vocab - 2, eoi_token_index=vocab - 3)
    return _save(T.Gemma3ForConditionalGeneration(config), folder, norms=True, centre=0.0)


def other_decoder(family: str, folder: Path) -> Path:
    """BLOOM with 6 heads; GPT-BigCode with one key/value head for 3 query heads; Phi with a parallel block and an output bias; StableLM with
    a quarter of each head turned and q/k/v biases."""
    import transformers as T

    vocab = byte_level_tokenizer(folder)
    ends = dict(bos_token_id=0, eos_token_id=0)
    if family == "bloom":  # 6 heads: ALiBi's slopes for a count that is not a power of two
        config = T.BloomConfig(vocab_size=vocab, hidden_size=24, n_layer=2, n_head=6, **ends)
        return _save(T.BloomForCausalLM(config), folder, norms=True)
    if family == "gpt_bigcode":
        config = T.GPTBigCodeConfig(vocab_size=vocab, n_embd=24, n_layer=2, n_head=3, n_positions=64, multi_query=True,
                                    **ends)
        return _save(T.GPTBigCodeForCausalLM(config), folder, norms=True)
    shared = dict(vocab_size=vocab, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
                  max_position_embeddings=64, tie_word_embeddings=False, **ends)
    if family == "phi":
        config = T.PhiConfig(**shared, rope_parameters={"rope_type": "default", "rope_theta": 888.0,
                                                        "partial_rotary_factor": 0.5}, qk_layernorm=True)
        return _save(T.PhiForCausalLM(config), folder, norms=True)
    config = T.StableLmConfig(**shared, num_key_value_heads=3, use_qkv_bias=True, qk_layernorm=True,
                              rope_parameters={"rope_type": "default", "rope_theta": 1234.0, "partial_rotary_factor": 0.25})
    return _save(T.StableLmForCausalLM(config), folder, norms=True)


NEW_DECODERS = ("gemma", "gemma2", "gemma3_text", "olmo2", "smollm3", "granite", "mixtral", "qwen3_moe", "gpt_oss",
                "gpt_bigcode", "phi", "stablelm", "bloom", "opt")
LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text", "olmo2", "smollm3",
              "granite", "mixtral", "qwen3_moe", "gpt_oss")
ENGINE = ("bert", "roberta", "xlm-roberta", "distilbert", "electra", "modernbert", "deberta-v2", "gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3", "gpt_neox",
          *NEW_DECODERS)
OTHERS = (OUTSIDE, "t5")
