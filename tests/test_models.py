"""attnviz.models: tiny random models of every family, made here, checked layer by layer against transformers' eager
attention on the same weights; the transformers path, encoder–decoders, budgets and dtypes."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: no hub access, ever
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import functools  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402
from tolerance import assert_close_rounding  # noqa: E402
from tiny_models import ENGINE, SENTENCES  # noqa: E402

from attnviz import models  # noqa: E402

DECODERS = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3", "gpt_neox", *tiny_models.NEW_DECODERS)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {family: tiny_models.build(family, root) for family in ENGINE + tiny_models.OTHERS}


SINKS = ("gpt_oss",)  # families whose heads have learned sinks: a row's weights sum to less than 1


@functools.lru_cache(maxsize=None)
def reference(folder: Path, family: str):
    """transformers' model of `folder` with eager attention, loaded once (a use's hooks are removed after it)."""
    import transformers as T

    auto = T.AutoModelForCausalLM if family in DECODERS + ("gptj",) else T.AutoModel
    return auto.from_pretrained(str(folder), attn_implementation="eager").eval()


def expected_mask(config: dict, family: str, layer: int, n: int) -> np.ndarray:
    """(n, n) where a query may read a key, written out from the config: all for an encoder (ModernBERT's local layers:
    |i − j| ≤ local_attention / 2); j ≤ i for a decoder,
    and j > i − w within a sliding window w (Mistral's and Phi-3's on every layer, the others' on the layers their
    layer_types calls sliding)."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    if family == "modernbert":  # its local layers read the pieces within local_attention / 2 either side
        local = config["layer_types"][layer] == "sliding_attention"
        return np.abs(i - j) <= config["local_attention"] // 2 if local else np.ones((n, n), bool)
    if family not in DECODERS:
        return np.ones((n, n), bool)
    allowed = j <= i
    window = config.get("sliding_window")
    types = config.get("layer_types")
    if window and (family in ("mistral", "phi3") or (types and types[layer] == "sliding_attention")):
        allowed &= j > i - window
    return allowed


@pytest.mark.parametrize("family", ENGINE)
@pytest.mark.parametrize("sentence", ["dog", "unseen"])
def test_every_layer_equals_transformers_eager_attention(family, sentence, folders):
    folder = folders[family]
    model = models.load(folder, device="cpu")
    assert model.computed_by == "attnviz" and model.note == ""
    run = model.run(SENTENCES[sentence])
    with torch.no_grad():
        out = reference(folder, family)(torch.tensor([run.pieces.ids]), output_attentions=True, output_hidden_states=True)
    expected = torch.stack(out.attentions)[:, 0].numpy()  # (L, H, n, n)
    assert run.weights.shape == expected.shape == (model.layers, model.heads, len(run.pieces), len(run.pieces))
    for layer in range(model.layers):
        assert np.abs(run.weights[layer] - expected[layer]).max() <= 1e-4, f"layer {layer}"
    if family in SINKS:  # a learned sink takes a share of each row: less than 1 is left, far less in some rows
        assert (run.weights.sum(-1) < 1).all() and run.weights.sum(-1).min() < 0.5
    else:
        assert np.allclose(run.weights.sum(-1), 1, atol=1e-5)
    if family in DECODERS:  # transformers' last hidden state is after the final norm (and OPT's project_out); ours is
        hidden = torch.stack(out.hidden_states[:-1])[:, 0].numpy()  # (L, n, d)  the residual stream
        assert np.abs(run.hidden[:-1] - hidden).max() <= 1e-4
        assert np.abs(run.next_logits - out.logits[0, -1].numpy()).max() <= 1e-3
        return
    hidden = torch.stack(out.hidden_states)[:, 0].numpy()  # (L + 1, n, d)
    if model.weights.final_norm is not None:  # ModernBERT: an encoder with a final norm, likewise
        assert np.abs(run.hidden[:-1] - hidden[:-1]).max() <= 1e-4
        final = model.weights.final_norm(torch.from_numpy(run.hidden[-1])).numpy()  # (n, d)
        assert np.abs(final - hidden[-1]).max() <= 1e-4
    else:
        assert np.abs(run.hidden - hidden).max() <= 1e-4


@pytest.mark.parametrize("family", ENGINE)
def test_scores_are_qk_over_root_dk_and_give_the_weights(family, folders):
    """Each head's scores, recomputed from its own queries and keys, give its weights under the mask written out from
    the config (causal, sliding windows); a grouped head reads its group's keys."""
    model = models.load(folders[family], device="cpu")
    config = json.loads((folders[family] / "config.json").read_text())
    if family == "qwen2":
        assert config["layer_types"] == ["full_attention", "sliding_attention", "sliding_attention"]
    run = model.run(SENTENCES["dog"])
    n = len(run.pieces)
    if family == "bloom":
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor

        alibi = build_alibi_tensor(torch.ones(1, n), model.heads, torch.float64)  # (H, 1, n)
    for layer in range(model.layers):
        trace = run.traces[layer]
        allowed = expected_mask(config, family, layer, n)
        for head in range(model.heads):
            q, k = trace.query[head].numpy(), trace.key[head // model.group].numpy()  # (n, dh) each
            by_hand = q @ k.T / np.sqrt(model.head_dim)  # (n, n)
            if config.get("attn_logit_softcapping") and family == "gemma2":  # Gemma 2's soft cap
                cap = config["attn_logit_softcapping"]
                by_hand = cap * np.tanh(by_hand / cap)
            if family == "bloom":  # ALiBi: −m_h (i − j), m_h read off transformers' bias m_h·j at j = 1
                slope = alibi[head, 0, 1].item()
                by_hand = by_hand - slope * (np.arange(n)[:, None] - np.arange(n)[None, :])
            if family == "deberta-v2":  # its two relative terms, from transformers' modules and distance buckets
                by_hand = by_hand + deberta_terms(reference(folders[family], family), layer, head, q, k, n)
            assert np.allclose(run.head_scores(layer, head), by_hand, atol=1e-5)
            logits = np.where(allowed, by_hand, -np.inf)
            if family in SINKS:  # the head's learned sink, as transformers holds it, one more logit in each row
                sink = float(reference(folders[family], family).model.layers[layer].self_attn.sinks[head])
                logits = np.concatenate([logits, np.full((n, 1), sink)], 1)  # (n, n + 1)
            softmax = np.exp(logits - logits.max(-1, keepdims=True))
            softmax = (softmax / softmax.sum(-1, keepdims=True))[:, :n]  # (n, n): the sink's column dropped
            assert np.allclose(softmax, run.weights[layer, head], atol=1e-5)
            assert np.all(run.weights[layer, head][~allowed] == 0)
    assert np.allclose(run.scores[1, 2], run.head_scores(1, 2))


def deberta_terms(module, layer: int, head: int, q: np.ndarray, k: np.ndarray, n: int) -> np.ndarray:
    """(n, n) DeBERTa's content → position and position → content terms written out from transformers' own modules
    and its build_relative_position: q (n, dh) is attnviz's, whose W_q holds 1/√3 (three terms), so the first term
    is over √dh and the second, from transformers' unscaled P^q, over √(3·dh)."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    config, attention = module.config, module.encoder.layer[layer].attention.self
    dh = q.shape[1]
    with torch.no_grad():
        table = module.encoder.get_rel_embedding()  # (2k, d), LayerNormed
        key_rows = attention.pos_key_proj(table)[:, head * dh:(head + 1) * dh].numpy()  # (2k, dh)
        query_rows = attention.pos_query_proj(table)[:, head * dh:(head + 1) * dh].numpy()  # (2k, dh)
    span = attention.pos_ebd_size
    dummy = torch.zeros(1, n, 1)
    delta = build_relative_position(dummy, dummy, config.position_buckets, config.max_relative_positions)[0].numpy()  # (n, n)
    index = np.clip(delta + span, 0, 2 * span - 1)  # (n, n)
    content = np.take_along_axis(q @ key_rows.T, index, 1) / np.sqrt(dh)  # (n, n) q_i · P^k_δ(i,j)
    position = np.take_along_axis(k @ query_rows.T, index.T, 1).T / np.sqrt(3 * dh)  # (n, n) k_j · P^q_δ(i,j)
    return content + position


def test_every_family_accepts_one_list_of_activations_each_as_transformers_computes_it():
    """engine.ACTIVATIONS is the one list: each name computes what transformers' ACT2FN computes for it (in float64,
    within the rounding of gelu_fast's written-out √(2/π)), and no family's mapping keeps a list of its own."""
    from transformers.activations import ACT2FN

    from attnviz.models import engine

    x = torch.linspace(-8, 8, 4001, dtype=torch.float64)  # (t,)
    for name, act in engine.ACTIVATIONS.items():
        assert (act(x) - ACT2FN[name](x)).abs().max() <= 1e-11, name
    folder = Path(__file__).resolve().parents[1] / "attnviz" / "models"
    own = [path.name for path in folder.glob("*.py") if re.search(r"activation not in \(", path.read_text())]
    assert own == []
    from attnviz.models.mapping import Unsupported, activation

    with pytest.raises(Unsupported, match="the activation 'tanh'"):
        activation("tanh")


def test_the_odd_shapes_are_what_the_configs_say(folders):
    llama = models.load(folders["llama"], device="cpu")
    assert (llama.heads, llama.kv_heads, llama.group, llama.head_dim, llama.d_model) == (8, 2, 4, 6, 32)
    assert llama.arch.rope_base == 5000.0 and llama.arch.rope_pairs == "halves"
    assert llama.weights.layers[0].b_query is not None and llama.weights.layers[0].b_gate is not None
    assert llama.run(SENTENCES["cat"]).pieces.tokens[0] == "<s>"  # its tokenizer puts <s> first
    qwen = models.load(folders["qwen2"], device="cpu")
    assert qwen.arch.windows == (None, 5, 5) and qwen.arch.rope_base == 123456.0
    assert qwen.weights.layers[0].b_key is not None and qwen.weights.layers[0].b_out is None
    assert models.load(folders["mistral"], device="cpu").arch.windows == (4, 4, 4)
    bert = models.load(folders["bert"], device="cpu")
    assert (bert.kind, bert.heads, bert.kv_heads, bert.dtype) == ("encoder", 3, 3, torch.float32)
    assert models.load(folders["roberta"], device="cpu").arch.padding_index == 1


@pytest.mark.parametrize("family", DECODERS)
def test_one_more_piece_from_the_cache_equals_the_whole_forward(family, folders):
    model = models.load(folders[family], device="cpu")
    short = model.run(SENTENCES["cat"])
    token = int(np.argmax(short.next_logits))
    grown = model.extend(short, token)
    whole = model.run_pieces(model.reader.append(short.pieces, token))
    assert grown.pieces.ids == whole.pieces.ids == [*short.pieces.ids, token]
    assert np.abs(grown.weights - whole.weights).max() <= 1e-5
    width = max(model.d_model, model.weights.layers[0].w_down.shape[-2])  # the longest sums: d_model or the MLP's width
    assert_close_rounding(grown.hidden, whole.hidden, width, model.layers)  # rounding alone (tests/tolerance.py)
    assert_close_rounding(grown.next_logits, whole.next_logits, width, model.layers + 1)


@pytest.mark.parametrize("family", DECODERS)
def test_the_logit_lens_last_layer_is_the_models_prediction(family, folders):
    model = models.load(folders[family], device="cpu")
    run = model.run(SENTENCES["dog"])
    ids, probs = model.logit_lens(run.hidden, top=3)
    assert ids.shape == probs.shape == (model.layers + 1, len(run.pieces), 3)
    assert ids[-1, -1, 0] == int(np.argmax(run.next_logits))
    expected = torch.softmax(torch.from_numpy(run.next_logits), -1).max().item()
    assert probs[-1, -1, 0] == pytest.approx(expected, rel=1e-4)


def test_another_architecture_goes_through_transformers(folders):
    folder = folders["gptj"]
    model = models.load(folder, device="cpu")
    assert (model.computed_by, model.kind, model.family) == ("transformers", "decoder", "gptj")
    run = model.run(SENTENCES["dog"])
    reference_model = reference(folder, "gptj")
    with torch.no_grad():
        out = reference_model(torch.tensor([run.pieces.ids]), output_attentions=True)
    expected = torch.stack(out.attentions)[:, 0].numpy()
    for layer in range(model.layers):
        assert np.abs(run.weights[layer] - expected[layer]).max() <= 1e-4
    assert np.abs(run.next_logits - out.logits[0, -1].numpy()).max() <= 1e-4
    # Its scores are ln α: the softmax over the causal keys gives the weights back.
    assert run.traces is None and run.scores_are_logs
    causal = np.tril(np.ones(run.weights.shape[-2:], bool))
    logits = np.where(causal, run.scores[1, 2], -np.inf)
    back = np.exp(logits - logits.max(-1, keepdims=True))
    assert np.allclose(back / back.sum(-1, keepdims=True), run.weights[1, 2], atol=1e-6)
    assert np.isfinite(run.scores).all()


@pytest.mark.parametrize("family", ["llama", "bert", "gemma2"])
def test_each_layers_attention_and_mlp_updates_equal_the_modules_outputs(family, folders):
    """A Trace's attention_out, middle and mlp_out (TransformerLens's hook_attn_out, hook_resid_mid, hook_mlp_out)
    against forward hooks on transformers' own modules: pre-norm Llama, post-norm BERT, Gemma 2's updates after their
    own norms."""
    model = models.load(folders[family], device="cpu")
    run = model.run(SENTENCES["dog"])
    module = reference(folders[family], family)
    seen, handles = {}, []

    def keep(name):
        return lambda _module, _inputs, output: seen.__setitem__(name, (output[0] if isinstance(output, tuple) else output)[0])

    for i in range(model.layers):
        if family == "llama":
            layer = module.model.layers[i]
            parts = {"attention_out": layer.self_attn, "mlp_out": layer.mlp}
        elif family == "gemma2":
            layer = module.model.layers[i]
            parts = {"attention_out": layer.post_attention_layernorm, "mlp_out": layer.post_feedforward_layernorm}
        else:
            layer = module.encoder.layer[i]
            parts = {"attention_out": layer.attention.output.dense, "middle": layer.attention, "mlp_out": layer.output.dense}
        handles += [part.register_forward_hook(keep((i, name))) for name, part in parts.items()]
    with torch.no_grad():
        module(torch.tensor([run.pieces.ids]))
    for handle in handles:
        handle.remove()
    for i, trace in enumerate(run.traces):
        if family != "bert":  # the MLP reads x + the attention's update
            assert torch.allclose(trace.middle, torch.from_numpy(run.hidden[i]) + trace.attention_out, atol=1e-5)
        for name in ("attention_out", "middle", "mlp_out"):
            if (i, name) in seen:
                assert (getattr(trace, name) - seen[(i, name)]).abs().max() <= 1e-4, (i, name)
    assert len(seen) == model.layers * (3 if family == "bert" else 2)


def test_one_run_pieces_signature_and_what_each_model_can_do(folders):
    """Both kinds of model take run_pieces(pieces, *, target, intervention); what a model can do is said by its
    properties, and what it cannot do is refused with why."""
    import inspect

    from attnviz import effects
    from attnviz.models.hf import TransformersModel
    from attnviz.models.loaded import EngineModel

    assert inspect.signature(EngineModel.run_pieces) == inspect.signature(TransformersModel.run_pieces)
    ours, theirs = models.load(folders["llama"], device="cpu"), models.load(folders["gptj"], device="cpu")
    assert (ours.can_intervene, ours.can_scan, ours.can_generate) == (True, True, True)
    assert (theirs.can_intervene, theirs.can_scan, theirs.can_generate) == (False, False, False)
    pieces = ours.tokenize(SENTENCES["dog"])
    chosen = effects.Ablation(((1, 0),))
    assert np.array_equal(ours.run_pieces(pieces, intervention=chosen).weights, ours.run(SENTENCES["dog"], None, chosen).weights)
    with pytest.raises(models.ModelError, match="keeps no seam"):
        theirs.run_pieces(theirs.tokenize(SENTENCES["dog"]), intervention=chosen)
    with pytest.raises(models.ModelError, match="writing piece by piece"):
        theirs.generate(SENTENCES["dog"], 2)
    with pytest.raises(effects.EffectsError, match="inside"):
        effects.head_effects(theirs, SENTENCES["dog"])
    with pytest.raises(models.ModelError, match="scan"):
        theirs.scan(SENTENCES["dog"])


def test_a_family_setting_the_engine_lacks_goes_through_transformers_and_says_why(folders, tmp_path):
    import shutil

    folder = tmp_path / "scaled"
    shutil.copytree(folders["llama"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 5000.0}
    (folder / "config.json").write_text(json.dumps(config))
    model = models.load(folder, device="cpu")
    assert model.computed_by == "transformers" and "RoPE of type 'dynamic'" in model.note
    run = model.run(SENTENCES["cat"])
    with torch.no_grad():
        out = reference(folder, "llama")(torch.tensor([run.pieces.ids]), output_attentions=True)
    assert np.abs(run.weights - torch.stack(out.attentions)[:, 0].numpy()).max() <= 1e-4


STRETCHED = {  # trained on 8 pieces, so that the sentences run past it and every rule changes some pair's θ_i
    "linear": {"rope_type": "linear", "factor": 2.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8},
    "yarn, its own betas and attention factor": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8,
                                                 "beta_fast": 8, "beta_slow": 0.5, "attention_factor": 1.3},
}


@pytest.mark.parametrize("how", STRETCHED)
def test_a_stretched_rope_is_computed_by_the_engine_as_transformers_computes_it(folders, tmp_path, how):
    import shutil

    folder = tmp_path / "stretched"
    shutil.copytree(folders["llama"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {**STRETCHED[how], "rope_theta": 5000.0}
    (folder / "config.json").write_text(json.dumps(config))
    model, plain = models.load(folder, device="cpu"), models.load(folders["llama"], device="cpu")
    assert model.computed_by == "attnviz" and "stretched" in " ".join(model.notes)
    run = model.run(SENTENCES["dog"])
    with torch.no_grad():
        out = reference(folder, "llama")(torch.tensor([run.pieces.ids]), output_attentions=True)
    assert np.abs(run.weights - torch.stack(out.attentions)[:, 0].numpy()).max() <= 1e-4
    assert np.abs(run.next_logits - out.logits[0, -1].numpy()).max() <= 1e-3
    assert np.abs(run.weights - plain.run(SENTENCES["dog"]).weights).max() > 1e-3  # the stretch shows
    written, prompt = model.generate(SENTENCES["cat"], 3), model.tokenize(SENTENCES["cat"]).ids  # from the K/V cache
    with torch.no_grad():
        made = reference(folder, "llama").generate(torch.tensor([prompt]), max_new_tokens=3, do_sample=False, num_beams=1)
    assert written.new_ids and written.new_ids == made[0, len(prompt):].tolist()[:len(written.new_ids)]


def test_gemma3_with_its_vision_tower_is_read_as_its_text_model_by_the_engine(tmp_path):
    """Gemma 3 4B and larger ship as gemma3, a vision tower beside the text model: the engine reads the text model
    (text_config, the weights under model.language_model.), its global layer's stretched RoPE included, and gives
    transformers' weights, logits and greedy pieces on text."""
    import transformers as T

    folder = tiny_models.build("gemma3", tmp_path)
    model = models.load(folder, device="cpu")
    assert model.computed_by == "attnviz" and any("stretched" in note for note in model.notes)
    module = T.Gemma3ForConditionalGeneration.from_pretrained(str(folder), attn_implementation="eager").eval()
    run = model.run(SENTENCES["dog"])
    with torch.no_grad():
        out = module(input_ids=torch.tensor([run.pieces.ids]), output_attentions=True)
    assert np.abs(run.weights - torch.stack(out.attentions)[:, 0].numpy()).max() <= 1e-4
    assert np.abs(run.next_logits - out.logits[0, -1].numpy()).max() <= 1e-3
    written, prompt = model.generate(SENTENCES["cat"], 3), model.tokenize(SENTENCES["cat"]).ids
    with torch.no_grad():
        made = module.generate(input_ids=torch.tensor([prompt]), max_new_tokens=3, do_sample=False, num_beams=1)
    assert written.new_ids and written.new_ids == made[0, len(prompt):].tolist()[:len(written.new_ids)]


def test_an_encoder_decoder_gives_its_three_kinds_of_attention(folders):
    import transformers as T

    folder = folders["t5"]
    model = models.load(folder, device="cpu")
    assert (model.kind, model.computed_by, model.layers, model.decoder_layers) == ("encoder-decoder", "transformers", 2, 3)
    run = model.run(SENTENCES["cat"])
    encoder, decoder, cross = run.attention["encoder"], run.attention["decoder"], run.attention["cross"]
    n, m = len(run.pieces), len(decoder.queries)
    assert encoder.weights.shape == (2, 3, n, n) and decoder.weights.shape == (3, 3, m, m) and cross.weights.shape == (3, 3, m, n)
    for kind in (encoder, decoder, cross):
        assert np.allclose(kind.weights.sum(-1), 1, atol=1e-5)
    assert np.all(np.triu(decoder.weights, 1) == 0) and decoder.causal and not cross.causal
    assert cross.keys is run.pieces and cross.queries is decoder.queries
    # Without a target the decoder reads the model's own greedy output, as generate() makes it.
    reference_model = T.AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    made = reference_model.generate(torch.tensor([run.pieces.ids]), max_new_tokens=32, do_sample=False, num_beams=1,
                                    use_cache=False)[0].tolist()
    assert decoder.queries.ids == (made[:-1] if made[-1] == 1 else made)
    # With a target the decoder reads [start] + its pieces.
    aimed = model.run(SENTENCES["cat"], target="The dog")
    target_ids = [i for i in model.tokenizer.encode("The dog").ids if i != 1]
    assert aimed.attention["decoder"].queries.ids == [0, *target_ids]


def test_sharded_safetensors_load_as_one(folders, tmp_path):
    import transformers as T

    whole = models.load(folders["gpt2"], device="cpu").run(SENTENCES["cat"])
    sharded = tmp_path / "sharded"
    T.GPT2LMHeadModel.from_pretrained(str(folders["gpt2"])).save_pretrained(str(sharded), max_shard_size="20KB")
    (sharded / "tokenizer.json").write_bytes((folders["gpt2"] / "tokenizer.json").read_bytes())
    assert (sharded / "model.safetensors.index.json").is_file() and len(list(sharded.glob("*.safetensors"))) > 1
    assert np.abs(models.load(sharded, device="cpu").run(SENTENCES["cat"]).weights - whole.weights).max() <= 1e-6


def test_bf16_weights_are_computed_in_float32_on_the_cpu(folders, tmp_path):
    import transformers as T

    folder = tmp_path / "bf16"
    T.LlamaForCausalLM.from_pretrained(str(folders["llama"])).to(torch.bfloat16).save_pretrained(str(folder))
    (folder / "tokenizer.json").write_bytes((folders["llama"] / "tokenizer.json").read_bytes())
    model = models.load(folder, device="cpu")
    assert model.stored_dtype == torch.bfloat16 and model.dtype == torch.float32
    assert "float32 (stored as bfloat16)" in model.describe()
    run = model.run(SENTENCES["cat"])
    reference_model = T.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float32)
    with torch.no_grad():
        out = reference_model.eval()(torch.tensor([run.pieces.ids]), output_attentions=True)
    assert np.abs(run.weights - torch.stack(out.attentions)[:, 0].numpy()).max() <= 1e-4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on a lent one, README: GPU)")
def test_on_cuda_half_precision_stays_and_matches_the_cpu(folders, tmp_path):
    import transformers as T

    folder = tmp_path / "bf16"
    T.LlamaForCausalLM.from_pretrained(str(folders["llama"])).to(torch.bfloat16).save_pretrained(str(folder))
    (folder / "tokenizer.json").write_bytes((folders["llama"] / "tokenizer.json").read_bytes())
    gpu, cpu = models.load(folder, device="cuda"), models.load(folder, device="cpu")
    assert gpu.dtype == torch.bfloat16 and gpu.weights.embeddings.device.type == "cuda"
    assert gpu.nbytes * 2 == cpu.nbytes
    a, b = gpu.run(SENTENCES["dog"]), cpu.run(SENTENCES["dog"])  # bf16 on the GPU; the same weights in float32
    module = T.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.bfloat16).cuda().eval()
    with torch.no_grad():
        out = module(torch.tensor([b.pieces.ids], device="cuda"), output_attentions=True)
    theirs = torch.stack(out.attentions)[:, 0].float().cpu().numpy()  # (L, H, n, n) transformers' bf16 on the GPU
    ours, peer = np.abs(a.weights - b.weights).max(), np.abs(theirs - b.weights).max()
    assert a.weights.dtype == np.float32 and 0 < ours <= max(1.5 * peer, 1e-3), (ours, peer)  # bf16 as close as theirs
    fp32 = models.load(folders["llama"], device="cuda").run(SENTENCES["dog"])
    assert np.abs(fp32.weights - models.load(folders["llama"], device="cpu").run(SENTENCES["dog"]).weights).max() <= 1e-4


# ---------------------------------------------------------------- the budget


def test_a_model_over_the_budget_is_refused_before_loading_with_both_numbers(folders):
    with pytest.raises(models.ModelError) as error:
        models.load(folders["bert"], device="cpu", budget=10_000)
    text = str(error.value)
    assert "more than the memory budget of 10.0 kB" in text and "needs " in text and models.BUDGET_SETTING in text


def test_the_budget_setting(monkeypatch):
    assert models.memory_budget("2GB")[0] == 2 * 10**9
    assert models.memory_budget("1.5 GiB")[0] == int(1.5 * 2**30)
    assert models.memory_budget("123456")[0] == 123456
    free, why = models.memory_budget("lots")  # not a size: the default, from the free memory
    assert free > 0 and "free" in why
    monkeypatch.setenv(models.BUDGET_SETTING, "3MB")
    assert models.memory_budget() == (3 * 10**6, "ATTNVIZ_MODEL_BUDGET=3MB")


def test_the_pieces_a_run_reads_are_bounded_by_its_heads():
    from attnviz.models.loaded import RUN_WEIGHTS_BYTES, max_pieces

    assert max_pieces(30, 9, 8192) == 512  # SmolLM2: 270 heads read 512 pieces
    assert max_pieces(32, 32, 4096) == 286  # 1,024 heads
    assert 32 * 32 * 286**2 * 4 <= RUN_WEIGHTS_BYTES < 32 * 32 * 287**2 * 4
    assert max_pieces(2, 3, 64) == 64  # a model's own context


def test_a_text_too_long_or_empty_gets_a_message(folders):
    model = models.load(folders["gpt2"], device="cpu")
    with pytest.raises(models.TextError, match="Type a text"):
        model.run("   ")
    with pytest.raises(models.TextError, match=r"reads at most 64 pieces here"):
        model.run("dog " * 100)
    with pytest.raises(models.TextError, match=r"this text has 1,200\. Shorten it by about 1,136 pieces"):
        model.run(" dog" * 1200)  # one piece each: thousands written as the page's intro writes them
    bert = models.load(folders["bert"], device="cpu")
    with pytest.raises(models.TextError, match="no words"):
        bert.run("\u200b")


def test_a_gguf_cache_folder_is_named_by_content_and_stale_copies_are_removed(tmp_path, monkeypatch):
    import hashlib

    from attnviz.models import gguf

    monkeypatch.setenv("ATTNVIZ_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "model.gguf"
    source.write_bytes(b"one")
    kept = gguf.cache_dir(source)
    assert kept.name == f"gguf-model-{hashlib.sha256(b'one').hexdigest()[:16]}"
    source.write_bytes(b"two")  # new content at the same path: a new folder; the same content again: the same one
    assert gguf.cache_dir(source) != kept
    source.write_bytes(b"one")
    assert gguf.cache_dir(source) == kept
    kept.mkdir(parents=True)
    stale, other, old = (kept.parent / name for name in ("gguf-model-0123456789abcdef", "gguf-other-fedcba9876543210",
                                                         "smollm2-135m-in-out-98362432-1732400000"))
    for folder, origin in ((stale, source), (other, tmp_path / "other.gguf"), (old, None)):
        folder.mkdir()
        if origin:
            (folder / "source.txt").write_text(str(origin.resolve()))
    assert sorted(gguf.remove_stale(kept, source)) == sorted([stale, old])
    assert kept.is_dir() and other.is_dir() and not stale.exists() and not old.exists()


def test_the_catalog_names_each_configured_model_once_and_reads_its_kind(folders, tmp_path):
    import os as _os

    from attnviz.models.catalog import kind_of, offers

    twin = tmp_path / "elsewhere" / "bert"
    twin.parent.mkdir()
    twin.mkdir()
    (twin / "config.json").write_text(json.dumps({"model_type": "bert"}))
    odd = tmp_path / "my model (v2)"
    odd.mkdir()
    setting = _os.pathsep.join([str(folders["gpt2"]), str(folders["bert"]), str(twin)])
    argv = ["app.py", "--model", str(folders["t5"]), "--model", str(odd), "--model", str(folders["gpt2"])]  # gpt2 again
    found = offers(argv, {"ATTNVIZ_MODELS": setting})
    assert list(found) == ["minilm", "smollm2", "gpt2", "bert", "bert-2", "t5", "my-model-v2"]
    assert [found[n].kind for n in found] == ["encoder", "decoder", "decoder", "encoder", "encoder", "encoder-decoder", None]
    assert found["bert-2"].source == str(twin.resolve()) and found["minilm"].builtin and not found["bert"].builtin
    assert kind_of(folders["gptj"]) == "decoder"  # from its architectures: GPTJForCausalLM
    assert kind_of(tmp_path / "nowhere") is None


@pytest.mark.parametrize("family", DECODERS)
def test_a_long_causal_run_taken_by_blocks_of_queries_equals_transformers(family, folders, monkeypatch):
    """engine.causal_attend (a block's scores only against the keys so far) on every decoder family, windows too,
    with blocks small enough that a sentence spans several, odd sizes included."""
    from attnviz.models import engine

    model = models.load(folders[family], device="cpu")
    whole = model.run(SENTENCES["dog"])
    n = len(whole.pieces)
    for block in (3, 5):
        monkeypatch.setattr(engine.attend, "CAUSAL_BLOCK", block)
        assert n > 2 * block
        blocked = model.run(SENTENCES["dog"])
        with torch.no_grad():
            out = reference(folders[family], family)(torch.tensor([blocked.pieces.ids]), output_attentions=True)
        assert np.abs(blocked.weights - torch.stack(out.attentions)[:, 0].numpy()).max() <= 1e-4
        assert np.abs(blocked.next_logits - out.logits[0, -1].numpy()).max() <= 1e-3
        assert np.abs(blocked.weights - whole.weights).max() <= 1e-5
        assert (family in SINKS or np.allclose(blocked.weights.sum(-1), 1, atol=1e-5)) and (np.triu(blocked.weights[0, 0], 1) == 0).all()


@pytest.mark.parametrize("family", ENGINE)
def test_texts_of_different_lengths_read_in_one_padded_forward_equal_each_read_alone(family, folders):
    """engine.batch_weights (the corpus pass of attnviz.heads): right padding, each query kept off the padding keys;
    every text's weights against transformers' eager forward on that text alone."""
    model = models.load(folders[family], device="cpu")
    texts = [SENTENCES["cat"], SENTENCES["dog"], "Hi", SENTENCES["unseen"]]
    pieces = [model.tokenize(text) for text in texts]
    assert len({len(p) for p in pieces}) == len(texts)  # every length differs: three of them are padded
    batched = model.batch_weights(pieces)
    reference_model = reference(folders[family], family)
    for p, weights in zip(pieces, batched):
        with torch.no_grad():
            out = reference_model(torch.tensor([p.ids]), output_attentions=True)
        expected = torch.stack(out.attentions)[:, 0].numpy()  # (L, H, n, n)
        assert weights.shape == expected.shape
        assert np.abs(weights - expected).max() <= 1e-4


def test_a_tokenizer_smaller_than_the_models_output_gets_labels_and_a_warning(tmp_path):
    import transformers as T

    folder = tmp_path / "bigger"
    folder.mkdir()
    known = tiny_models.byte_level_tokenizer(folder)
    config = T.GPT2Config(vocab_size=known + 40, n_embd=24, n_layer=2, n_head=3, n_positions=64)
    tiny_models._save(T.GPT2LMHeadModel(config), folder)
    model = models.load(folder, device="cpu")
    run = model.run(SENTENCES["cat"])
    assert run.next_logits.shape == (known + 40,)
    labels = model.reader.labels([known - 1, known, known + 39])
    assert labels[1:] == [f"⟨id {known}⟩", f"⟨id {known + 39}⟩"] and labels[0] != labels[1]
    said = model.reader.vocabulary_gap(len(run.next_logits))
    assert f"knows {known:,} pieces" in said and f"scores {known + 40:,}" in said and "the other 40" in said
    assert model.reader.vocabulary_gap(known) is None


def test_a_model_transformers_computes_loads_without_its_progress_bars_or_warnings(folders, capfd):
    """A notebook cell that loads a model shows nothing but its result; transformers' own settings are left as found."""
    from transformers.utils import logging

    before = logging.get_verbosity(), logging.is_progress_bar_enabled()
    capfd.readouterr()
    for family in ("gptj", "t5"):
        models.load(folders[family], "cpu").run(SENTENCES["dog"])
    out, err = capfd.readouterr()
    assert out == "" and err == "", err[-500:]
    assert (logging.get_verbosity(), logging.is_progress_bar_enabled()) == before


def test_the_engines_accessors_give_what_the_forward_used(folders):
    """Trace.head: a grouped query head's key and value are its group's (transformers' repeat_kv); position_rows:
    RoBERTa's learned positions start after its padding index (transformers' create_position_ids_from_input_ids)."""
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    mistral = models.load(folders["mistral"], "cpu")
    run = mistral.run(SENTENCES["dog"])
    arch, trace = run.architecture, run.traces[1]
    repeated = trace.key.repeat_interleave(arch.heads // arch.kv_heads, dim=0)  # (H, n, dh) as transformers repeats
    for head in range(arch.heads):
        query, key, value = trace.head(arch, head)
        assert torch.equal(query, trace.query[head]) and torch.equal(key, repeated[head])
        assert torch.equal(value, trace.value.repeat_interleave(arch.heads // arch.kv_heads, dim=0)[head])
    roberta = models.load(folders["roberta"], "cpu")
    ids = torch.tensor([roberta.tokenize(SENTENCES["cat"]).ids])  # (1, n)
    expected = RobertaEmbeddings.create_position_ids_from_input_ids(ids, roberta.arch.padding_index)[0]  # (n,)
    assert torch.equal(roberta.arch.position_rows(ids.shape[1]), expected)


def test_each_mechanism_that_changes_a_picture_gets_its_sentence(folders):
    """engine.notes, what the pages say beside the figures: the numbers are the configs', the layers counted from 1
    as the pages count them (gemma2's windowed layers are 0 and 2 in the library's count, smollm3's unturned one 1)."""
    def notes(family):
        return " ".join(models.load(folders[family], device="cpu").notes)

    config = json.loads((folders["gemma2"] / "config.json").read_text())
    capped = notes("gemma2")
    assert f"{config['attn_logit_softcapping']:g}·tanh(s / {config['attn_logit_softcapping']:g})" in capped
    assert f"capped the same way, at ±{config['final_logit_softcapping']:g}" in capped
    assert "normed before it joins the residual stream" in capped and "Layers 1, 3 read only a sliding window" in capped
    assert "Layer 2 turns no position" in notes("smollm3")
    assert "(77, 5555)" in notes("gemma3_text")
    assert "mixtures of 4 experts, 2 for each piece" in notes("mixtral")
    assert "ALiBi lowers each score by m_h·(i − j)" in notes("bloom")
    assert notes("llama") == "" and notes("bert") == ""


def offer(folder: Path, monkeypatch) -> None:
    """The pages offer the model in `folder` (ATTNVIZ_MODELS), the server's list of offers made again."""
    from appkit.served import offered

    monkeypatch.setenv("ATTNVIZ_MODELS", str(folder))
    offered.clear()  # a process-wide cache: another test's server may have filled it


def test_the_decoder_page_says_what_a_soft_cap_does_beside_the_figures(folders, monkeypatch):
    from page_support import run_page

    offer(folders["gemma2"], monkeypatch)
    at = run_page("decoder.py", {"model": "gemma2"})
    assert not at.exception and not at.error
    captions = " ".join(c.value for c in at.caption)
    assert "soft-capped" in captions and "capped the same way" in captions


@pytest.mark.parametrize("family", ["bloom", "gemma2"])
def test_a_shaped_score_taken_apart_on_the_page_shows_its_sum_then_its_shaping(family, folders, monkeypatch):
    """The neuron view of a family that shapes q·k/√d_k (BLOOM's ALiBi, Gemma 2's cap): its terms sum to s = q·k/√d_k
    written out here, the next line gives the score the heatmap draws, and the weight is the model's; the positions
    view of BLOOM draws the ALiBi bias of head 1, −m₁(i − j) with m₁ from transformers."""
    from page_support import run_page

    offer(folders[family], monkeypatch)
    text = "The cat watched the dog from the sofa"
    at = run_page("decoder.py", {"model": family, "text": text, "layer": "2", "head": "2", "query": "6", "key": "2",
                                 "parts": "1", "learned": "1"})
    assert not at.exception and not at.error
    run = models.load(folders[family], device="cpu").run(text)
    trace = run.traces[1]
    s = float(trace.query[1][6].double() @ trace.key[1 // run.architecture.group][2].double()) / np.sqrt(run.architecture.head_dim)
    lines = [line.value.strip("$\n") for line in at.latex]
    total = float(next(line for line in lines if line.startswith("s_{6,2} =")).split("=")[-1])
    score = float(next(line for line in lines if line.startswith("a_{6,2} =")).split("=")[-1])
    assert total == pytest.approx(s, rel=1e-4, abs=1e-5)
    assert score == pytest.approx(float(run.head_scores(1, 1)[6, 2]), rel=1e-4, abs=1e-5) and abs(score - total) > 1e-3
    weight = float(next(line for line in lines if re.search(r"\\alpha_\{6,2\} =", line)).split("=")[-1])
    assert weight == pytest.approx(float(run.weights[1, 1, 6, 2]), rel=1e-4)
    if family == "bloom":
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor

        from page_support import decode, spec_titled

        n = len(run.pieces)
        slope = build_alibi_tensor(torch.ones(1, n), run.architecture.heads, torch.float64)[0, 0, 1].item()
        bias = decode(spec_titled(at, "Head 1's bias")["data"][0]["z"])  # (n, n)
        expected = -slope * np.maximum(np.arange(n)[:, None] - np.arange(n)[None, :], 0)
        np.testing.assert_allclose(bias, expected, atol=1e-6)


def test_a_local_layer_of_modernbert_is_drawn_with_its_window_on_the_trained_model_page(folders, monkeypatch):
    """ModernBERT's layer 2 reads 3 pieces either side: the heatmap sends that window with the scores, the weights the
    page keeps (its downloads) are the model's own, the caption says so, and "Why here?" sums to the model's score."""
    from page_support import component_data, run_page

    offer(folders["modernbert"], monkeypatch)
    text = "The cat watched the dog from the old red sofa by the window"
    at = run_page("trained.py", {"model": "modernbert", "text": text, "layer": "2", "head": "2", "query": "9",
                                 "why": "1"})
    assert not at.exception and not at.error
    data = component_data(next(c for c in at.get("bidi_component") if '"window"' in c.proto.json))
    assert data["window"] == 3 and data["window_both"] is True
    assert any("This layer reads a sliding window (each piece reads the pieces within 3 either side)" in c.value
               for c in at.caption)
    run = models.load(folders["modernbert"], device="cpu").run(text)
    assert run.weights[1, 1, 9, :6].sum() == 0 and run.weights[1, 1, 9, 6:13].sum() == pytest.approx(1, abs=1e-5)
    key = int(np.argmax(run.weights[1, 1, 9]))
    said = next(m.value for m in at.markdown if m.value.startswith("Query #9"))
    assert f"key #{key}" in said and f"{float(run.head_scores(1, 1)[9, key]):.4g}" in said


def test_a_run_shows_as_one_line(folders):
    model = models.load(folders["llama"], device="cpu")
    run = model.run(SENTENCES["cat"])
    shown = repr(run)
    assert "\n" not in shown and len(shown) < 200 and f"{len(run.pieces.ids)} pieces" in shown
    assert f"{model.layers} layers × {model.heads} heads" in shown


@pytest.mark.parametrize("family", ["gpt2", "roberta", "mistral", "modernbert", "gpt_oss", "bloom", "deberta-v2", "gpt_neox"])
def test_the_models_facade_answers_from_the_models_own_config_and_modules(family, folders):
    """What the app asks a model (attnviz.models.Model: causal, context, window, the keys each query reads, sink, ALiBi
    slopes, the score's formula, relative distances, the learned position table, RoPE's turned dimensions), checked
    against the config and transformers' modules."""
    model = models.load(folders[family], "cpu")
    config = json.loads((folders[family] / "config.json").read_text())
    hf = reference(folders[family], family)
    assert model.causal == (family in DECODERS + ("bloom",))
    offset = config["pad_token_id"] + 1 if family == "roberta" else 0  # RoBERTa's positions start after its padding
    assert model.context == config.get("max_position_embeddings", config.get("n_positions", model.context)) - offset
    for layer in range(model.layers):
        expected = expected_mask(config, family, layer, 64)
        lower = expected[np.tril_indices(64) if model.causal else np.nonzero(np.ones((64, 64), bool))]
        window = model.window(layer)
        assert (window is None) == bool(lower.all()), (layer, window)
        allowed = model.allowed(64, layer)  # (64, 64) or None: every key
        causal = np.tril(np.ones((64, 64), bool)) if model.causal else np.ones((64, 64), bool)
        assert np.array_equal(np.ones((64, 64), bool) if allowed is None else allowed, expected & causal), layer
        for head in range(model.heads):
            sink = model.sink(layer, head)
            if family == "gpt_oss":
                assert sink == pytest.approx(float(hf.model.layers[layer].self_attn.sinks[head].detach()), abs=0)
            else:
                assert sink is None
    assert model.has_sinks == (family == "gpt_oss")
    run = model.run("the cat sat on the mat and the dog sat on the log")
    n, labels = len(run.pieces), run.pieces.labels()
    for layer in range(model.layers):
        allowed = model.allowed(n, layer)  # (n, n) or None
        assert np.array_equal(run.allowed(layer=layer), allowed) if allowed is not None else run.allowed(layer=layer) is None
        drawn, keys, sink = model.drawn_scores(run, layer, 1, labels)  # (n, n) or (n, n + 1) with the sink's column
        assert (sink, keys[:n], drawn.shape[1]) == (model.sink(layer, 1), labels, n + (sink is not None))
        assert sink is None or (keys[-1] == "∅ sink" and np.all(drawn[:, -1] == np.float32(sink)))
        logits = drawn.astype(np.float64)
        if allowed is not None:
            logits[:, :n][~allowed] = -np.inf
        weights = np.exp(logits - logits.max(1, keepdims=True))
        weights /= weights.sum(1, keepdims=True)  # (n, n [+ 1]) the browser's softmax at τ = 1
        assert np.abs(weights[:, :n] - run.weights[layer, 1]).max() <= 1e-5, layer
    if model.causal:
        assert np.array_equal(model.allowed(5), np.tril(np.ones((5, 5), bool)))
    else:
        assert model.allowed(5) is None
    slopes = model.alibi_slopes()
    if family == "bloom":
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor

        mask = torch.ones(1, 2)  # (1, 2): the bias at key position 1 is the slope itself
        alibi = build_alibi_tensor(mask, model.heads, torch.float32)[:, 0, 1]  # (H,)
        assert np.array_equal(slopes, alibi.numpy())
    else:
        assert slopes is None
    formula = model.score_formula()  # each rule the family adds, named once, over the model's own √d_h
    assert formula.startswith("a_{ij} = ") and r"\sqrt{%d}" % model.head_dim in formula
    assert ("m_h" in formula) == (family == "bloom")
    assert (r"\tanh" in formula) == bool(config.get("attn_logit_softcapping"))
    assert ("P^k" in formula) == (family == "deberta-v2")
    table = model.position_table(6)
    if family in ("gpt2", "roberta"):
        embeddings = hf.transformer.wpe if family == "gpt2" else hf.embeddings.position_embeddings
        start = 0 if family == "gpt2" else config["pad_token_id"] + 1  # RoBERTa's positions start after its padding
        assert np.array_equal(table, embeddings.weight[start:start + 6].detach().numpy())
    else:
        assert table is None
    rotary = model.rotary()
    if family in ("mistral", "gpt_neox", "gpt_oss", "modernbert"):
        rope = config.get("rope_parameters") or {}
        factor = config.get("rotary_pct") or config.get("partial_rotary_factor") or rope.get("partial_rotary_factor", 1.0)
        dims = int(factor * model.head_dim)
        assert rotary[0] == dims
    else:
        assert rotary is None
    relative = model.relative_distances(5)
    if family == "deberta-v2":
        distance, span, _ = relative
        assert span == config.get("position_buckets", config["max_relative_positions"]) and distance.shape == (5, 5)
        assert np.array_equal(distance, np.subtract.outer(np.arange(5), np.arange(5)).astype(np.float32))  # near: as is
    else:
        assert relative is None


def test_a_model_transformers_computes_answers_the_facade_with_nothing_inside(folders):
    model = models.load(folders[tiny_models.OUTSIDE], "cpu")
    assert model.computed_by == "transformers"
    assert (model.window(0), model.sink(0, 0), model.alibi_slopes(), model.position_table(4), model.rotary(),
            model.relative_distances(4), model.has_sinks) == (None, None, None, None, None, None, False)
    with pytest.raises(models.ModelError, match="scan of a whole document"):
        model.scan_limit(2**20)


def test_the_old_reading_module_still_works_and_says_where_each_name_moved():
    import importlib

    from attnviz.models import lens, summaries, walk

    old = importlib.import_module("attnviz.models.reading")
    for name, home in (("head_summaries", summaries), ("rollout", summaries), ("head_steps", walk),
                       ("head_formula", walk), ("logit_lens_table", lens)):
        with pytest.warns(DeprecationWarning, match=f"use {home.__name__}.{name}"):
            assert getattr(old, name) is getattr(home, name)
    with pytest.raises(AttributeError):
        old.no_such_name


@pytest.mark.parametrize("old, new, name", [
    ("attnviz.attention", "attnviz.functional", "grouped_attend"),
    ("attnviz.attentions", "attnviz.output_attentions", "run_of"),
    ("attnviz.selfattention", "attnviz.sentence", "Config"),
    ("attnviz.models.model", "attnviz.models.loaded", "Model"),
    ("attnviz.models.run", "attnviz.models.result", "Run"),
])
def test_a_renamed_module_still_works_and_says_where_it_moved(old, new, name):
    import importlib

    before, after = importlib.import_module(old), importlib.import_module(new)
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} is deprecated .* use {new}.{name}"):
        assert getattr(before, name) is getattr(after, name)
    with pytest.raises(AttributeError):
        before.no_such_name


def test_the_layers_weights_old_names_still_work():
    from attnviz.models import engine

    with pytest.warns(DeprecationWarning, match="use attnviz.models.engine.LayerWeights"):
        assert engine.Block is engine.LayerWeights
    weights = engine.Weights(embeddings=torch.zeros(2, 2), layers=[])
    with pytest.warns(DeprecationWarning, match="use Weights.layers"):
        assert weights.blocks is weights.layers


@pytest.mark.parametrize("family", ["mistral", "qwen2", "modernbert", "gpt2"])
def test_a_heads_walk_writes_the_keys_its_layer_reads(family, folders):
    """The walk's weights step names the mask its layer applies (a sliding window, a local window either side, the
    causal mask), and its weights are 0 exactly where that mask, written out from the config, hides a key."""
    model = models.load(folders[family], device="cpu")
    config = json.loads((folders[family] / "config.json").read_text())
    run = model.run(SENTENCES["dog"])
    n = len(run.pieces)
    for layer in range(model.layers):
        sliding = family == "mistral" or config.get("layer_types", [""] * model.layers)[layer] == "sliding_attention"
        if family == "modernbert":
            mask = r"M_{|i - j| \le %d}" % (config["local_attention"] // 2) if sliding else None
        elif family == "gpt2" or not sliding:
            mask = r"M_{\text{causal}}"
        else:
            mask = r"M_{i - %d < j \le i}" % config["sliding_window"]
        step = next(s for s in models.head_steps(run, layer, 0) if s.title.startswith("Weights"))
        assert ((step.matrix > 0) == expected_mask(config, family, layer, n)).all(), layer
        for latex in (step.latex, models.head_formula(model, layer=layer)):
            assert (mask in latex) if mask else ("M_" not in latex), (layer, latex)
