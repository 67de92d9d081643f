"""attnviz.effects.why (attnviz.effects.score_parts, composition): a score taken apart into what wrote each side, checked
against transformers. Each part's vector is read out of transformers' own forward with hooks (a pre-hook on each
W_o for z, a forward hook on each MLP), put through the layer's norm with its scale frozen at the whole stream's
value, W_q or W_k, and transformers' own rotary; every cell and the score are compared. Composition scores against
‖W_OV M‖_F / (‖W_OV‖_F ‖M‖_F) written out with d × d matrices."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: no hub access, ever

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402
from tiny_models import SENTENCES  # noqa: E402

from attnviz import effects, models  # noqa: E402

TEXT = SENTENCES["dog"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("why")
    return {family: tiny_models.build(family, root) for family in ("gpt2", "llama", "bert", "gptj")}


def hooked(module, family: str, ids: list[int]):
    """transformers' forward on `ids` with z (the input of each W_o) and each MLP's output kept: (hidden states
    (L + 1, n, d), z (L, n, H·dh), mlp (L, n, d))."""
    layers = module.transformer.h if family == "gpt2" else module.model.layers
    z, mlp, handles = {}, {}, []
    for i, layer in enumerate(layers):
        o_proj = layer.attn.c_proj if family == "gpt2" else layer.self_attn.o_proj
        handles.append(o_proj.register_forward_pre_hook(lambda _m, args, i=i: z.__setitem__(i, args[0][0].double())))
        handles.append(layer.mlp.register_forward_hook(lambda _m, _a, out, i=i: mlp.__setitem__(i, out[0].double())))
    with torch.no_grad():
        out = module(torch.tensor([ids]), output_hidden_states=True)
    for handle in handles:
        handle.remove()
    return torch.stack(out.hidden_states)[:, 0].double(), torch.stack([z[i] for i in range(len(layers))]), \
        torch.stack([mlp[i] for i in range(len(layers))])


def transformers_parts(module, family: str, ids: list[int], layer: int, head: int, position: int, side: str):
    """(names, vectors (C, dh)) of one side of a score, from transformers' modules and hooks alone."""
    config = module.config
    heads = config.num_attention_heads
    dh = getattr(config, "head_dim", None) or config.hidden_size // heads
    hidden, z, mlp = hooked(module, family, ids)
    layers = module.transformer.h if family == "gpt2" else module.model.layers
    names, parts = ["embeddings", "bias"], [hidden[0, position], torch.zeros_like(hidden[0, position])]
    for l in range(layer):
        o_proj = layers[l].attn.c_proj if family == "gpt2" else layers[l].self_attn.o_proj
        w_o = o_proj.weight.double() if family == "gpt2" else o_proj.weight.double().T  # (H·dh, d)
        for h in range(heads):
            names.append(f"L{l + 1}H{h + 1}")  # the pages' count, from 1
            parts.append(z[l, position, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh])
        if o_proj.bias is not None:
            parts[1] = parts[1] + o_proj.bias.double()
        names.append(f"L{l + 1} MLP")
        parts.append(mlp[l, position])
    parts = torch.stack(parts)  # (C, d)
    assert torch.allclose(parts.sum(0), hidden[layer, position], atol=1e-4)  # the parts are the stream
    whole = parts.sum(0)
    if family == "gpt2":
        norm = layers[layer].ln_1
        sigma = torch.sqrt(whole.var(unbiased=False) + norm.eps)
        normed = (parts - parts.mean(-1, keepdim=True)) / sigma * norm.weight.double()
        normed[1] += norm.bias.double()
        weight = layers[layer].attn.c_attn.weight.double()  # (d, 3d): W_q, W_k, W_v side by side
        bias = layers[layer].attn.c_attn.bias.double()
        d = config.hidden_size
        column = slice(0, d) if side == "query" else slice(d, 2 * d)
        vectors = normed @ weight[:, column]
        vectors[1] += bias[column]
        return names, vectors[:, head * dh:(head + 1) * dh]
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    norm = layers[layer].input_layernorm
    normed = parts / torch.sqrt(whole.pow(2).mean() + norm.variance_epsilon) * norm.weight.double()
    attention = layers[layer].self_attn
    projection = attention.q_proj if side == "query" else attention.k_proj
    vectors = normed @ projection.weight.double().T
    if projection.bias is not None:
        vectors[1] += projection.bias.double()
    which = head if side == "query" else head // (heads // config.num_key_value_heads)
    vectors = vectors[:, which * dh:(which + 1) * dh]  # (C, dh)
    cos, sin = module.model.rotary_emb(vectors[None].float(), torch.tensor([[position]]))  # (1, 1, dh) each
    turned, _ = apply_rotary_pos_emb(vectors[None, :, None, :], vectors[None, :, None, :], cos.double(), sin.double())
    return names, turned[0, :, 0]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_every_cell_equals_the_parts_read_from_transformers_hooks(family, folders):
    """A tiny GPT-2 (LayerNorm with biases: mean and σ frozen, the centering on each part) and a tiny Llama (RMSNorm,
    RoPE, 8 query heads on 2 key/value heads, biases everywhere)."""
    import transformers as T

    model = models.load(folders[family], device="cpu")
    module = T.AutoModelForCausalLM.from_pretrained(str(folders[family]), attn_implementation="eager").eval()
    ids = model.tokenize(TEXT).ids
    layer, head, query, key = model.layers - 1, 5 if family == "llama" else 1, len(ids) - 1, 3
    found = effects.score_parts(model, TEXT, layer, head, query, key)
    names, q = transformers_parts(module, family, ids, layer, head, query, "query")
    _, k = transformers_parts(module, family, ids, layer, head, key, "key")
    table = (q @ k.T / np.sqrt(q.shape[-1])).detach().numpy()  # (C, C)
    assert found.query_names == found.key_names == names
    assert found.table.shape == (len(names), len(names))
    assert np.abs(found.table - table).max() <= 1e-4
    assert found.table.sum() == pytest.approx(found.score, abs=1e-5)
    assert found.score == pytest.approx(float(table.sum()), abs=1e-4)
    assert found.score == pytest.approx(float(model.run(TEXT).head_scores(layer, head)[query, key]), abs=1e-4)
    assert np.abs(found.table).max() > 1e-2 and (np.abs(found.table) > 1e-6).sum() > 10  # many parts take part


@pytest.mark.parametrize("family", ["bert", "gemma2", "bloom", "olmo2", "qwen3", "phi", "stablelm", "deberta-v2"])
def test_the_table_sums_to_the_score_the_model_computes_in_every_kind_of_family(family, folders, tmp_path):
    """Post-norm BERT (every part through each later LayerNorm), Gemma 2's norms of each update and soft cap, BLOOM's
    ALiBi, OLMo 2's whole-query norm, Qwen3's per-head query and key norms, Phi's shared q/k LayerNorm with its bias,
    StableLM's own LayerNorm for each head, DeBERTa's two relative terms (one more part on each side): the table sums
    to the model's score."""
    folder = folders.get(family) or tiny_models.build(family, tmp_path)
    model = models.load(folder, device="cpu")
    run = model.run(TEXT)
    n = len(run.pieces)
    for layer, head, query, key in ((model.layers - 1, 1, n - 2, 2), (1, 0, 5, 5)):
        found = effects.score_parts(model, TEXT, layer, head, query, key)
        expected = float(run.head_scores(layer, head)[query, key])
        assert found.table.sum() == pytest.approx(expected, abs=1e-4) and found.score == pytest.approx(expected, abs=1e-4)
    relative = family == "deberta-v2"  # and its relative position, a part of each side
    assert len(found.query_names) == 2 + model.heads + 1 + relative  # layer 1 reads the embeddings, bias, layer 0's heads, its MLP
    if relative:
        assert found.query_names[-1] == "relative position" and found.table[-1, -1] == 0
        assert min(abs(found.query_shares()["relative position"]), abs(found.key_shares()["relative position"])) > 1e-3


def test_the_strongest_parts_fold_the_rest_into_other_and_keep_the_sum(folders):
    model = models.load(folders["llama"], device="cpu")
    found = effects.score_parts(model, TEXT, 2, 3, 10, 4)
    rows, cols, table = found.strongest(3)
    assert rows[3:] == cols[3:] == ["other heads", "other MLPs", "other"]  # the rest folded by kind
    assert table.sum() == pytest.approx(found.score, abs=1e-6)
    heads = [i for i, name in enumerate(found.query_names) if name not in rows and "H" in name]
    assert table[3].sum() == pytest.approx(found.table[heads].sum(), abs=1e-9)  # "other heads" is the other heads
    assert abs(found.query_shares()[rows[0]]) == pytest.approx(np.abs(found.table.sum(1)).max())
    first = effects.score_parts(model, TEXT, 0, 3, 10, 4)  # layer 0: embeddings and bias alone, nothing to fold
    rows, cols, table = first.strongest(6)
    assert rows == first.query_names and cols == first.key_names and table.shape == (2, 2)


def test_bad_input_gets_a_message(folders):
    model = models.load(folders["llama"], device="cpu")
    with pytest.raises(effects.PartsError, match="must not come after the query"):
        effects.score_parts(model, TEXT, 1, 1, 2, 5)
    with pytest.raises(effects.PartsError, match="from 0 to"):
        effects.score_parts(model, TEXT, 1, 1, 500, 0)
    with pytest.raises(effects.PartsError, match="layer must be"):
        effects.score_parts(model, TEXT, 9, 1, 2, 1)
    with pytest.raises(effects.PartsError, match="whole number"):
        effects.score_parts(model, TEXT, 1, "one", 2, 1)
    with pytest.raises(effects.EffectsError, match="computed by transformers"):
        effects.score_parts(models.load(folders["gptj"], device="cpu"), TEXT, 0, 0, 2, 1)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_composition_scores_equal_the_formula_with_whole_matrices(family, folders):
    model = models.load(folders[family], device="cpu")
    found = effects.composition(model)
    arch = model.arch
    assert set(found) == {"q", "k", "v"} and all(v.shape == (arch.layers, arch.heads) * 2 for v in found.values())

    def head_matrices(layer: int, head: int):
        params = model.weights.layers[layer]
        gain = torch.diag(params.attention_norm.weight.double())  # (d, d) the norm's weight, folded
        dh, kv = arch.head_dim, arch.kv_head(head)
        w_q = gain @ params.w_query.double()[:, head * dh:(head + 1) * dh]
        w_k = gain @ params.w_key.double()[:, kv * dh:(kv + 1) * dh]
        w_v = gain @ params.w_value.double()[:, kv * dh:(kv + 1) * dh]
        w_o = params.w_out.double()[head * dh:(head + 1) * dh]
        return w_q @ w_k.T, w_v @ w_o  # W_QK, W_OV (d, d) each

    def score(a, b):
        return float(torch.linalg.norm(a @ b) / (torch.linalg.norm(a) * torch.linalg.norm(b)))

    for (l1, h1), (l2, h2) in (((0, 1), (1, 2)), ((0, 2), (arch.layers - 1, 0))):
        _, ov1 = head_matrices(l1, h1)
        qk2, ov2 = head_matrices(l2, h2)
        assert found["q"][l1, h1, l2, h2] == pytest.approx(score(ov1, qk2), rel=1e-5)
        assert found["k"][l1, h1, l2, h2] == pytest.approx(score(ov1, qk2.T), rel=1e-5)
        assert found["v"][l1, h1, l2, h2] == pytest.approx(score(ov1, ov2), rel=1e-5)
    assert (found["q"][1, :, 0, :] == 0).all() and (found["v"][1, :, 1, :] == 0).all()  # only earlier → later
    assert found["q"][0, :, 1, :].std() > 0  # heads differ


@pytest.mark.slow
def test_smollm2_cells_equal_the_parts_read_from_transformers_hooks(smollm2_reference):
    """SmolLM2-135M (30 layers, 9 query heads on 3 key/value heads, RoPE θ = 100,000) from its GGUF file, both
    readings of the same weights, at a layer past the middle: every one of its 2 + 17·10 parts a side."""
    _, module, _ = smollm2_reference
    model = models.load("smollm2", device="cpu")
    text = "When he saw his owner, the dog was happy, so he wagged his tail. When he saw his owner, the dog"
    ids = model.tokenize(text).ids
    layer, head, query, key = 17, 4, len(ids) - 1, 8
    found = effects.score_parts(model, text, layer, head, query, key)
    names, q = transformers_parts(module, "llama", ids, layer, head, query, "query")
    _, k = transformers_parts(module, "llama", ids, layer, head, key, "key")
    table = (q @ k.T / np.sqrt(q.shape[-1])).detach().numpy()
    assert found.query_names == names and np.abs(found.table - table).max() <= 1e-4
    assert found.score == pytest.approx(float(model.run(text).head_scores(layer, head)[query, key]), abs=1e-4)


def test_the_trained_model_page_draws_why_here_and_its_cells_sum_to_the_score():
    """MiniLM on the Trained model page: "Why here?" open on a chosen cell. Its chart is the library's table folded to
    the strongest parts, summing to the score the neuron view gives; the composition table names earlier heads."""
    from page_support import decode, run_page, spec_titled

    params = {"text": "the dog was happy", "layer": "3", "head": "2", "query": "4", "key": "2", "why": "1"}
    at = run_page("trained.py", params)
    assert not at.exception and not at.error
    found = effects.score_parts(models.load("minilm"), "the dog was happy", 2, 1, 4, 2)
    spec = spec_titled(at, "Layer 3, head 2: the score's parts")
    table = decode(spec["data"][0]["z"])
    rows, cols, expected = found.strongest(6)
    np.testing.assert_allclose(table, expected, atol=1e-5)
    drawn = [y.split(" ", 1)[1] for y in spec["data"][0]["y"]]  # "#0 q: embeddings": the row's number, its name
    assert drawn == [f"q: {r}" for r in rows] and table.sum() == pytest.approx(found.score, abs=1e-4)
    assert any(f"= {found.score:.6g}" in line.value for line in at.latex)
    a, b = np.unravel_index(np.argmax(np.abs(expected)), expected.shape)  # the largest cell and its share of the score
    assert any(f"q: {rows[a]} × k: {cols[b]} {expected[a, b]:+.3g} ({expected[a, b] / found.score:.0%})" in c.value
               for c in at.caption)
    assert any(f"the largest cell is q: {rows[a]} × k: {cols[b]} ({expected[a, b]:+.3g}" in m.value for m in at.markdown)
    frame = next(d.value for d in at.dataframe if "query (Q)" in d.value.columns)
    scores = effects.composition(models.load("minilm"))["k"][:2, :, 2, 1]  # (2, H) layers 0 and 1 into layer 2, head 1
    l, h = np.unravel_index(np.argmax(scores), scores.shape)
    assert frame["key (K)"][0] == f"L{l + 1}H{h + 1} {scores[l, h]:.2f}"  # counted from 1, as the panel's heading
    values = effects.value_parts(models.load("minilm"), "the dog was happy", 2, 1, 4)
    name, share = max(values.items(), key=lambda item: abs(item[1]))
    said = next(m.value for m in at.markdown if m.value.startswith("**What wrote the values"))
    assert f"{name} {share:+.2f}" in said


def test_the_notebooks_table_is_the_librarys_folded_table_with_text_escaped(folders):
    from attnviz import notebook

    import html as markup

    model = models.load(folders["llama"], device="cpu")
    text = "<b>the dog</b> was happy & so"
    labels = model.tokenize(text).labels()
    odd = [i for i, label in enumerate(labels) if set(label) & set("<>&")]  # pieces that HTML would read as markup
    query, key = odd[-1], odd[0]
    shown = notebook.score_parts(model, text, 1, 2, query, key, top=3)
    html = shown._repr_html_()
    rows, cols, table = shown.parts.strongest(3)
    assert markup.escape(labels[query]) in html and markup.escape(labels[key]) in html and "<b>" not in html
    assert all(f"{v:+.4f}" in html for v in table.ravel())
    assert html.count("<tr>") == len(rows) + 1 and f"{shown.parts.score:.4f}" in html


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_values_parts_sum_to_the_heads_output_read_from_transformers(family, folders):
    """V-composition on a text: each part's share z_c·z/‖z‖² of the head's output z at the query (the forward's own,
    equal to what a pre-hook on transformers' W_o reads) sums to 1 only where the parts sum to z; more than the
    embeddings take part."""
    import transformers as T

    model = models.load(folders[family], device="cpu")
    module = T.AutoModelForCausalLM.from_pretrained(str(folders[family]), attn_implementation="eager").eval()
    ids = model.tokenize(TEXT).ids
    layer, head, query = model.layers - 1, 2, len(ids) - 1
    shares = effects.value_parts(model, TEXT, layer, head, query)
    _, z, _ = hooked(module, family, ids)  # z: (L, n, H·dh) each W_o's input
    dh = model.head_dim
    output = z[layer, query, head * dh:(head + 1) * dh]  # (dh,) transformers' own
    names, _ = transformers_parts(module, family, ids, layer, head, query, "query")
    assert list(shares) == names and sum(shares.values()) == pytest.approx(1.0, abs=1e-5)
    run = model.run(TEXT)
    engine_output = run.traces[layer].head_output[head, query].double()
    assert torch.allclose(engine_output, output, atol=1e-4)  # the output the shares take apart is transformers'
    assert sum(1 for v in shares.values() if abs(v) > 1e-3) > 3


def test_a_links_key_past_the_text_opens_the_strongest_and_the_link_says_so():
    from page_support import run_page

    params = {"text": "the dog was happy", "layer": "3", "head": "2", "query": "4", "key": "9999", "why": "1"}
    at = run_page("trained.py", params)
    assert not at.exception
    assert at.session_state["key"] == -1 and "key" not in at.query_params  # not key=511 beside a panel on key #2
    assert any(m.value.startswith("Query #4") for m in at.markdown)


def test_the_old_name_still_works_and_says_where_it_moved():
    import importlib

    from attnviz.effects import why

    old = importlib.import_module("attnviz.why")
    with pytest.warns(DeprecationWarning, match="use attnviz.effects.why.score_parts"):
        assert old.score_parts is why.score_parts
    with pytest.raises(AttributeError):
        old.no_such_name


def test_the_sentence_speaks_of_what_the_table_shows_largest_a_folded_group_included():
    """Ten heads of 0.3 and an MLP of 0.667 on the query side: the table keeps the MLP and five heads and folds five
    into "other heads" (1.5), its largest row; the sentence names that group, then the largest single part, and the
    largest cell as the table has it."""
    from attnviz.effects.why import ScoreParts

    query = [f"L1H{h}" for h in range(1, 11)] + ["L1 MLP"]
    table = np.zeros((11, 2))  # (query parts, key parts)
    table[:10, 0], table[10, 0], table[10, 1] = 0.3, 0.667, 0.1
    found = ScoreParts(layer=1, head=0, query=3, key=1, pieces=["a", "b", "c", "d"], score=float(table.sum()),
                       query_names=query,
                       key_names=["embeddings", "L2 MLP"], table=table)
    rows, cols, folded = found.strongest(6)
    assert rows[-1] == "other heads" and folded[-1].sum() == pytest.approx(1.5)
    said = found.sentence()
    assert f"the query side's largest share is other heads (+1.5 of {found.score:.3g})" in said
    assert "its largest single part L1 MLP (+0.767)" in said
    assert f"the largest cell is q: other heads × k: embeddings (+1.5, {1.5 / found.score:.0%} of the score)" in said
    assert "the key side's largest part is embeddings (+3.67 of 3.77)" in said
