"""attnviz.effects against independent computations: transformers with a forward pre-hook that removes a head's slice
before the output projection (ablation), transformers' eager attention with a 4-D mask (knockout), LM-TT's shares
written out by hand on a one-layer model (contributions), the logit itself (direct logit attribution), and a model
planted by the test to copy one piece (occlusion)."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: no hub access, ever
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import functools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402
from tiny_models import SENTENCES  # noqa: E402

from attnviz import effects, models  # noqa: E402
from attnviz.models.engine import Intervention  # noqa: E402
from bench.bench_effects import naive_head_effects  # noqa: E402  the plain way: one forward per head

ENCODERS = ("bert", "electra", "modernbert", "deberta-v2")
FAMILIES = ("gpt2", "llama", *ENCODERS, "qwen3", "phi3", "gpt_neox", *tiny_models.NEW_DECODERS)  # GPT-2's Conv1D, Llama's
# grouped K/V (8 heads on 2), BERT's post-norm encoder, Qwen3's normed queries and keys, Phi-3's fused projections,
# GPT-NeoX's parallel residual, Gemma's caps and norms of the updates, SmolLM3's layer without positions, experts,
# ELECTRA's narrow embeddings, GPT-BigCode's one key/value head, Phi's parallel layer with one norm, ModernBERT's
# local layers reading either side, DeBERTa's relative terms
TEXT = SENTENCES["cat"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {family: tiny_models.build(family, root) for family in (*FAMILIES, tiny_models.OUTSIDE)}


@pytest.fixture(scope="module")
def loaded(folders):
    return {family: models.load(folders[family], device="cpu") for family in FAMILIES}


@functools.lru_cache(maxsize=None)
def reference(folder: Path, family: str):
    """transformers' model of `folder`, loaded once (each use's hooks are removed after it)."""
    import transformers as T

    auto = T.AutoModel if family in ENCODERS else T.AutoModelForCausalLM
    return auto.from_pretrained(str(folder), attn_implementation="eager").eval()


def output_projection(module, family: str, layer: int):
    """The module that multiplies the heads' outputs by W_o in transformers' model."""
    if family in ("gpt2", "gpt_bigcode"):
        return module.transformer.h[layer].attn.c_proj
    if family == "phi":
        return module.model.layers[layer].self_attn.dense
    if family == "bloom":
        return module.transformer.h[layer].self_attention.dense
    if family == "stablelm":
        return module.model.layers[layer].self_attn.o_proj
    if family in tiny_models.LLAMA_LIKE:
        return module.model.layers[layer].self_attn.o_proj
    if family == "gpt_neox":
        return module.gpt_neox.layers[layer].attention.dense
    if family == "opt":
        return module.model.decoder.layers[layer].self_attn.out_proj
    if family == "modernbert":
        return module.layers[layer].attn.Wo
    return module.encoder.layer[layer].attention.output.dense


def with_heads_removed(folder, family, ids, heads, how="zero"):
    """transformers' output with each (layer, head) slice of W_o's input zeroed (or set to its mean over positions)
    by a forward pre-hook."""
    module = reference(folder, family)
    dh = module.config.hidden_size // module.config.num_attention_heads
    dh = getattr(module.config, "head_dim", None) or dh
    handles = []
    for layer, head in heads:
        def hook(_, args, head=head):
            (x,) = args
            x = x.clone()
            cut = x[..., head * dh:(head + 1) * dh]
            x[..., head * dh:(head + 1) * dh] = 0 if how == "zero" else cut.mean(-2, keepdim=True)
            return (x,)
        handles.append(output_projection(module, family, layer).register_forward_pre_hook(hook))
    with torch.no_grad():
        out = module(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for handle in handles:
        handle.remove()
    return out


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("how", ["zero", "mean"])
def test_ablation_equals_transformers_with_the_heads_slice_removed(family, how, folders, loaded):
    model = loaded[family]
    heads = [(0, 1), (model.layers - 1, 2)]
    run = effects.ablate(model, TEXT, heads, how=how)
    out = with_heads_removed(folders[family], family, run.pieces.ids, heads, how)
    expected = torch.stack(out.attentions)[:, 0].numpy()  # (L, H, n, n)
    assert np.abs(run.weights - expected).max() <= 1e-4
    clean = model.run(TEXT)
    assert np.abs(run.weights[1:] - clean.weights[1:]).max() > 1e-3  # the ablation changed what later layers do
    assert run.intervention == effects.Ablation(tuple(heads), how)
    if family in ENCODERS:
        hidden = torch.stack(out.hidden_states)[:, 0].numpy()  # (L + 1, n, d); ModernBERT's last after its final norm
        final = effects.output_vector(model, torch.from_numpy(run.hidden[-1])).numpy()  # (n, d)
        assert np.abs(run.hidden[:-1] - hidden[:-1]).max() <= 1e-4 and np.abs(final - hidden[-1]).max() <= 1e-4
        assert run.logits is None
    else:
        assert run.logits.shape == (len(run.pieces), model.weights.unembed.shape[1])
        assert np.abs(run.logits - out.logits[0].numpy()).max() <= 1e-4


@pytest.mark.parametrize("family", FAMILIES)
def test_every_heads_effect_in_one_call_equals_one_ablated_forward_per_head(family, folders, loaded):
    model = loaded[family]
    found = effects.head_effects(model, TEXT)
    assert found.shape == (model.layers, model.heads) and found.dtype == np.float32
    ids = model.tokenize(TEXT).ids
    clean = reference(folders[family], family)
    with torch.no_grad():
        base = clean(torch.tensor([ids]), output_hidden_states=True)
    expected = np.zeros((model.layers, model.heads))
    for layer in range(model.layers):
        for head in range(model.heads):
            out = with_heads_removed(folders[family], family, ids, [(layer, head)])
            if family in ENCODERS:  # 1 − cos of the first piece's final vector
                a, b = out.hidden_states[-1][0, 0].double(), base.hidden_states[-1][0, 0].double()
                expected[layer, head] = 1 - float(a @ b / (a.norm() * b.norm()))
            else:  # Δ log p of the clean run's most likely next piece
                target = int(base.logits[0, -1].argmax())
                expected[layer, head] = float(torch.log_softmax(out.logits[0, -1].double(), -1)[target]
                                              - torch.log_softmax(base.logits[0, -1].double(), -1)[target])
    assert np.abs(found - expected).max() <= 1e-4
    assert np.abs(found).max() > 1e-3  # some head matters
    assert np.abs(effects.head_effects(model, TEXT, "mean") - naive_head_effects(model, TEXT, "mean")).max() <= 1e-4


def test_a_long_text_is_split_into_batches_with_the_same_effects(loaded, monkeypatch):
    model = loaded["llama"]
    whole = effects.head_effects(model, SENTENCES["dog"])
    monkeypatch.setattr(effects.ablation, "COPY_ROWS", 1)  # one layer's copies a batch (read where the batches are cut)
    assert effects.layer_chunks(model.layers, model.heads, 10) == [(0, 1), (1, 2), (2, 3)]
    assert np.abs(effects.head_effects(model, SENTENCES["dog"]) - whole).max() <= 1e-5


@pytest.mark.parametrize("family", FAMILIES)
def test_knockout_equals_transformers_with_a_4d_mask(family, folders, loaded, monkeypatch):
    model = loaded[family]
    ids = model.tokenize(TEXT).ids
    n = len(ids)
    edges = [(n - 1, 1), (n - 2, 1), (5, 2), (3, 3)]
    run = effects.knock_out(model, TEXT, edges)
    allowed = torch.ones(n, n, dtype=torch.bool) if family in ENCODERS else torch.ones(n, n, dtype=torch.bool).tril()
    for q, k in edges:
        allowed[q, k] = False

    def additive(allowed):
        return torch.zeros(1, 1, n, n).masked_fill(~allowed, torch.finfo(torch.float32).min)  # (1, 1, n, n)

    def windowed(window):
        i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
        inside = (i - j).abs() <= window if family in ENCODERS else j > i - window  # ModernBERT's reach either side
        return allowed & inside  # (n, n)

    windows = set(model.arch.windows or (None,))
    if len(windows) > 1:  # windowed and full layers (Qwen3, Gemma 2 and 3, SmolLM3): one 4D mask per kind of layer
        window = max(w for w in windows if w)
        mask = {"full_attention": additive(allowed), "sliding_attention": additive(windowed(window))}
    else:  # one window on every layer (Phi-3), or none
        window = windows.pop()
        mask = additive(windowed(window) if window else allowed)
    module = reference(folders[family], family)
    if family == "bloom":  # BLOOM makes its ALiBi bias from a 2D mask: made here from the pieces' count instead
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor

        monkeypatch.setattr(module.transformer, "build_alibi_tensor",
                            lambda _mask, heads, dtype: build_alibi_tensor(torch.ones(1, n), heads, dtype))
    # OPT counts its positions from a 2D mask: given here, as the 4D mask has none
    positions = dict(position_ids=torch.arange(n)[None]) if family == "opt" else {}
    with torch.no_grad():
        if family == "deberta-v2":  # its model multiplies the embeddings by a 2D mask: a 3D one goes to its encoder
            hidden = module.embeddings(input_ids=torch.tensor([ids]))  # (1, n, d)
            out = module.encoder(hidden, allowed[None].long(), output_attentions=True)
        else:
            out = module(torch.tensor([ids]), attention_mask=mask, output_attentions=True, **positions)
    assert np.abs(run.weights - torch.stack(out.attentions)[:, 0].numpy()).max() <= 1e-4
    assert (run.weights[:, :, n - 1, 1] == 0).all()
    if family not in ENCODERS:
        assert np.abs(run.logits - out.logits[0].numpy()).max() <= 1e-4


def test_knockout_in_one_layer_renormalises_that_layers_softmax(loaded):
    model = loaded["gpt2"]
    clean = model.run(TEXT)
    n = len(clean.pieces)
    run = effects.knock_out(model, TEXT, [(n - 1, 0), (n - 1, 2)], layers=[1])
    assert np.array_equal(run.weights[0], clean.weights[0])  # layer 0 untouched
    scores = clean.scores[1].astype(np.float64).copy()  # (H, n, n): layer 1 reads an unchanged input
    scores[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = -np.inf
    scores[:, n - 1, [0, 2]] = -np.inf
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    assert np.abs(run.weights[1] - expected).max() <= 1e-5


def test_a_run_grown_from_its_cache_keeps_its_knockout(loaded):
    model = loaded["llama"]
    short = effects.knock_out(model, TEXT, [(7, 1), (8, 1)])
    token = int(np.argmax(short.next_logits))
    grown = model.extend(short, token)
    whole = model.run_pieces(model.reader.append(short.pieces, token), intervention=short.intervention)
    assert grown.intervention == short.intervention
    assert np.abs(grown.weights - whole.weights).max() <= 1e-5
    assert np.abs(grown.next_logits - whole.next_logits).max() <= 1e-4
    with pytest.raises(ValueError, match="every position at once"):
        model.extend(effects.ablate(model, TEXT, [(0, 0)], how="mean"), token)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_clean_run_is_unchanged_by_the_seam(family, loaded):
    """The seam's no-op, Intervention(), passes through intervene on every layer; a clean run skips it. Both agree."""
    model = loaded[family]
    clean = model.run(TEXT)
    assert clean.intervention is None
    noop = Intervention()
    through = model.run_pieces(model.tokenize(TEXT), intervention=noop)
    assert through.intervention is noop
    assert np.abs(through.weights - clean.weights).max() <= 1e-6
    assert np.abs(through.hidden - clean.hidden).max() <= 1e-5
    if clean.next_logits is not None:
        assert np.abs(through.next_logits - clean.next_logits).max() <= 1e-4


# ---------------------------------------------------------------- contributions


def test_contributions_are_lm_tts_shares_written_out_on_a_one_layer_model(tmp_path):
    import transformers as T

    folder = tmp_path / "one"
    folder.mkdir()
    vocab = tiny_models.byte_level_tokenizer(folder)
    tiny_models._save(T.GPT2LMHeadModel(T.GPT2Config(vocab_size=vocab, n_embd=12, n_layer=1, n_head=2, n_positions=32)),
                      folder)
    model = models.load(folder, device="cpu")
    run = model.run("the dog was happy")
    found = effects.contributions(model, "the dog was happy")
    params = model.weights.layers[0]
    x = run.hidden[0].astype(np.float64)  # (n, d)
    n, heads, dh = x.shape[0], 2, 6
    mean, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    normed = (x - mean) / np.sqrt(var + 1e-5) * params.attention_norm.weight.numpy() + params.attention_norm.bias.numpy()
    value = normed @ params.w_value.numpy() + params.b_value.numpy()  # (n, d)
    w_out = params.w_out.numpy().astype(np.float64)
    for i in range(n):
        parts = [x[i]]
        for h in range(heads):
            for j in range(n):
                parts.append(run.weights[0, h, i, j] * value[j, h * dh:(h + 1) * dh] @ w_out[h * dh:(h + 1) * dh])
        y = x[i] + sum(parts[1:]) + params.b_out.numpy()
        proximity = np.array([max(np.abs(y).sum() - np.abs(y - z).sum(), 1e-5) for z in parts])
        share = proximity / proximity.sum()
        assert found.residual[0, i] == pytest.approx(share[0], abs=1e-5)
        assert np.abs(found.attention[0, i] - share[1:].reshape(heads, n)).max() <= 1e-5
        mlp = run.hidden[1, i] - y  # the MLP's output
        mp = np.array([max(np.abs(run.hidden[1, i]).sum() - np.abs(run.hidden[1, i] - z).sum(), 1e-5) for z in (mlp, y)])
        assert found.mlp[0, i] == pytest.approx(mp[0] / mp.sum(), abs=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_positions_shares_sum_to_one_and_routes_reach_the_input(family, loaded):
    found = effects.contributions(loaded[family], TEXT)
    assert np.allclose(found.attention.sum((2, 3)) + found.residual, 1, atol=1e-5)
    assert np.allclose(found.mlp + found.mlp_residual, 1, atol=1e-5)
    assert np.allclose(found.pieces.sum(-1), 1, atol=1e-5)
    routes = found.routes(0.0)  # every edge: each layer's edges reach every piece the last one can see
    n = found.residual.shape[1]
    assert {r.source for r in routes if r.layer == 0} == set(range(n))
    threshold = float(found.pieces[-1, n - 1].max()) * 0.9  # at least the top layer's largest edge passes
    strict = found.routes(threshold)
    assert all(r.share >= threshold for r in strict) and 0 < len(strict) < len(routes)
    top = max(r.layer for r in strict)
    assert {r.target for r in strict if r.layer == top} == {n - 1}


# ---------------------------------------------------------------- direct logit attribution


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2", "olmo2", "granite", "phi"])
def test_the_heads_terms_and_the_rest_sum_to_the_logit(family, loaded, folders):
    """Through the final norm, and the norms of each update (Gemma 2, OLMo 2), each with its scale frozen; Gemma 2's
    logit before its final cap, computed here from transformers' own output."""
    model = loaded[family]
    found = effects.logit_attribution(model, TEXT, top=3)
    run = model.run(TEXT)
    assert found.piece == int(np.argmax(run.next_logits))
    expected = float(run.next_logits[found.piece])
    if family == "gemma2":
        cap = json.loads((folders[family] / "config.json").read_text())["final_logit_softcapping"]
        expected = cap * float(np.arctanh(np.float64(expected) / cap))
    assert found.total == pytest.approx(expected, abs=1e-3)
    assert found.heads.shape == (model.layers, model.heads) and found.promoted.shape == (model.layers, model.heads, 3)
    assert "embeddings" in found.terms and f"layer {model.layers - 1} MLP" in found.terms
    # a head's direct term is its promoted vector's entry for the piece: the promoted piece scores at least as high
    l, h = np.unravel_index(np.argmax(found.heads), found.heads.shape)
    assert found.piece in found.promoted[l, h] or found.heads[l, h] <= found.heads.max()


def test_an_encoder_has_no_logit_to_attribute(loaded):
    with pytest.raises(effects.EffectsError, match="only a decoder"):
        effects.logit_attribution(loaded["bert"], TEXT)


# ---------------------------------------------------------------- importance


def planted_copier(folder: Path, text: str, where: int) -> tuple[Path, int]:
    """A one-head GPT-2 that copies the piece at `where` in `text` (its id, wherever it is): a constant query that matches only that piece's
    key (W_q = 0, b_q on its dimension), values and W_o that carry the piece's identity, no MLP, tied output matrix."""
    import transformers as T
    from tokenizers import Tokenizer

    folder.mkdir()
    vocab = tiny_models.byte_level_tokenizer(folder)
    ids = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids
    target = ids[where]
    assert ids.count(target) == 1
    model = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=vocab, n_embd=vocab, n_layer=1, n_head=1, n_positions=32))
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.transformer.wte.weight.copy_(torch.eye(vocab) * 4)  # each piece its own direction
        for norm in (model.transformer.h[0].ln_1, model.transformer.h[0].ln_2, model.transformer.ln_f):
            norm.weight.fill_(1.0)
        c_attn = model.transformer.h[0].attn.c_attn  # Conv1D (in, 3·out): W_q, W_k, W_v side by side
        c_attn.bias[target] = 6.0  # q = 6·e_target, whatever the input
        c_attn.weight[:, vocab:2 * vocab] = torch.eye(vocab)  # k = the normed input
        c_attn.weight[:, 2 * vocab:] = torch.eye(vocab)  # v = the normed input
        model.transformer.h[0].attn.c_proj.weight.copy_(torch.eye(vocab) * 8)
    model.save_pretrained(str(folder))
    return folder, target


def test_occlusion_ranks_first_the_piece_a_planted_model_copies(tmp_path):
    text = "the cat saw the dog from the old sofa"
    folder, target = planted_copier(tmp_path / "copier", text, 4)
    model = models.load(folder, device="cpu")
    run = model.run(text)
    where = run.pieces.ids.index(target)
    assert int(np.argmax(run.next_logits)) == target  # it copies the piece
    found = effects.importance(model, text)
    occlusion = found.measures["occlusion"]
    assert int(np.argmax(occlusion[found.compared])) == where
    assert occlusion[where] > 1.0 and np.abs(np.delete(occlusion[:-1], where)).max() < occlusion[where] / 4
    assert found.target == run.pieces.labels()[where]


@pytest.mark.parametrize("family", FAMILIES)
def test_importance_gives_every_measure_and_its_agreement(family, loaded):
    model = loaded[family]
    found = effects.importance(model, TEXT)
    n = len(model.tokenize(TEXT))
    assert set(found.measures) == set(effects.MEASURES)
    assert all(v.shape == (n,) and np.isfinite(v).all() for v in found.measures.values())
    assert found.agreement["occlusion"] == pytest.approx(1.0)
    assert found.compared == (list(range(n - 1)) if family not in ENCODERS else list(range(n)))
    assert found.measures["attention"] == pytest.approx(model.run(TEXT).weights[-1, :, found.read].mean(0))
    assert "changes the prediction most" in found.sentence()
    # the occlusion of piece j equals a knock_out of every edge into j from the other pieces
    j = 2
    edges = [(i, j) for i in range(n) if i != j]
    knocked = effects.knock_out(model, TEXT, edges)
    clean = model.run(TEXT)
    if family in ENCODERS:  # the output vectors, after ModernBERT's final norm
        a, b = (effects.output_vector(model, torch.from_numpy(r.hidden[-1, 0])).double().numpy() for r in (knocked, clean))
        expected = 1 - a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    else:
        t = int(np.argmax(clean.next_logits))
        expected = effects.log_prob(clean.next_logits, t) - effects.log_prob(knocked.next_logits, t)
    assert found.measures["occlusion"][j] == pytest.approx(abs(expected), abs=1e-4)
    assert found.change[j] == pytest.approx(expected, abs=1e-4)


def test_spearman_is_the_rank_correlation_written_out():
    a, b = np.array([0.1, 0.5, 0.3, 0.9]), np.array([1.0, 3.0, 2.0, 0.5])
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    d = ra - rb
    assert effects.spearman(a, b) == pytest.approx(1 - 6 * (d ** 2).sum() / (4 * (16 - 1)))
    assert effects.spearman(np.ones(4), b) is None


def test_gradient_times_input_against_autograd_through_transformers(folders, loaded):
    model = loaded["gpt2"]
    ids = model.tokenize(TEXT).ids
    module = reference(folders["gpt2"], "gpt2")
    vectors = module.transformer.wte.weight[ids].detach().clone().requires_grad_(True)
    out = module(inputs_embeds=vectors[None])
    target = int(out.logits[0, -1].argmax())
    torch.log_softmax(out.logits[0, -1], -1)[target].backward()
    expected = (vectors.grad * vectors.detach()).norm(dim=-1).numpy()
    found = effects.importance(model, TEXT).measures["gradient"]
    assert np.abs(found - expected).max() <= 1e-4


# ---------------------------------------------------------------- bad input


def test_bad_input_gets_a_clear_message(folders, loaded):
    other = models.load(folders[tiny_models.OUTSIDE], device="cpu")
    for call in (lambda: effects.head_effects(other, TEXT), lambda: effects.ablate(other, TEXT, [(0, 0)]),
                 lambda: effects.importance(other, TEXT)):
        with pytest.raises(effects.EffectsError, match="computed by transformers"):
            call()
    model = loaded["gpt2"]
    with pytest.raises(models.TextError):
        effects.head_effects(model, "   ")
    with pytest.raises(effects.EffectsError, match="No head"):
        effects.ablate(model, TEXT, [(model.layers, 0)])
    with pytest.raises(effects.EffectsError, match="No head"):
        effects.ablate(model, TEXT, [(0, -1)])
    with pytest.raises(effects.EffectsError, match="is a pair"):
        effects.ablate(model, TEXT, ["x"])
    with pytest.raises(effects.EffectsError, match="how must be"):
        effects.ablate(model, TEXT, [(0, 0)], how="half")
    with pytest.raises(effects.EffectsError, match="No edge"):
        effects.knock_out(model, TEXT, [(0, 99)])
    with pytest.raises(effects.EffectsError, match="Layers run"):
        effects.knock_out(model, TEXT, [(1, 0)], layers=[9])
    with pytest.raises(effects.EffectsError, match="at least two"):
        effects.importance(model, "a")
    with pytest.raises(effects.EffectsError, match="No piece"):
        effects.head_effects(loaded["bert"], TEXT, piece=500)


def test_a_control_head_is_drawn_among_the_untyped_heads():
    ids = [5, 6, 7, 5, 6, 7]
    n = len(ids)
    uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]  # (n, n) no type
    previous = np.eye(n, k=-1)
    previous[0, 0] = 1
    sink = np.zeros((n, n))
    sink[:, 0] = 1
    weights = np.stack([uniform, previous, sink, uniform])  # (4, n, n)
    assert effects.typed_heads(weights, ids) == {1, 2}
    drawn = {effects.control_head(0, 4, seed, {1, 2}) for seed in range(50)}
    assert drawn == {3}  # neither the head turned off nor a typed one
    assert effects.control_head(0, 3, 0, {1, 2}) in {1, 2}  # every other head typed: drawn from them all
