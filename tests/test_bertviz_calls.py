"""bertviz's calls in attnviz.notebook: head_view(attention, tokens) and model_view(attention, tokens), and the
encoder–decoder's keywords, fed what transformers returns with output_attentions=True from tiny models made here.
The widget's weights are the model's own; a wrong shape gets a message that says what to change."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402

from attnviz.notebook import head_view, model_view  # noqa: E402

TEXT = "The cat watched the dog from the sofa."


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """family → (transformers' output, the tokens), as a bertviz user gets them."""
    import transformers as T

    root = tmp_path_factory.mktemp("bertviz")
    found = {}
    for family, auto in (("bert", T.AutoModel), ("gpt2", T.AutoModelForCausalLM), ("t5", T.AutoModelForSeq2SeqLM)):
        folder = tiny_models.build(family, root)
        found[f"{family} folder"] = folder
        tokenizer = T.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
        model = auto.from_pretrained(str(folder), attn_implementation="eager").eval()
        ids = torch.tensor([tokenizer(TEXT)["input_ids"]])  # (1, n)
        with torch.no_grad():
            if family == "t5":
                target = ids[:, :5]  # (1, 5)
                out = model(input_ids=ids, decoder_input_ids=target, output_attentions=True)
                found[family] = (out, tokenizer.convert_ids_to_tokens(ids[0]), tokenizer.convert_ids_to_tokens(target[0]))
            else:
                out = model(input_ids=ids, output_attentions=True)
                found[family] = (out, tokenizer.convert_ids_to_tokens(ids[0]))
    return found


def test_head_view_takes_bertvizs_arguments_and_draws_the_models_weights(outputs):
    out, tokens = outputs["bert"]
    view = head_view(out.attentions, tokens, layer=1, heads=[2])
    assert (view.layer, view.head, view.mask) == (1, 2, "none")
    np.testing.assert_allclose(view.weights, out.attentions[1][0, 2].numpy(), atol=1e-6)
    assert view.atlas["layers"] == 2 and view.atlas["heads"] == 3 and view.data["rows"] == tokens
    view.layer, view.head = 0, 1
    np.testing.assert_allclose(view.weights, out.attentions[0][0, 1].numpy(), atol=1e-6)


def test_model_view_of_a_decoder_is_causal_and_a_pair_names_its_second_sentence(outputs):
    out, tokens = outputs["gpt2"]
    view = model_view(out.attentions, tokens)
    assert view.mask == "causal" and view.data["masks"]["causal"] == "causal"
    np.testing.assert_allclose(view.weights, out.attentions[0][0, 0].numpy(), atol=1e-6)
    paired = head_view(outputs["bert"][0].attentions, outputs["bert"][1], sentence_b_start=4)
    assert paired.data["title"].endswith("sentence B from token #4")


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_an_encoder_decoders_three_kinds_as_bertviz_passes_them(outputs, kind):
    out, source, target = outputs["t5"]
    view = model_view(encoder_attention=out.encoder_attentions, decoder_attention=out.decoder_attentions,
                      cross_attention=out.cross_attentions, encoder_tokens=source, decoder_tokens=target, kind=kind,
                      layer=1, head=2)
    expected = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}[kind]
    np.testing.assert_allclose(view.weights, expected[1][0, 2].numpy(), atol=1e-6)
    assert view.data["rows"] == [t.replace("Ġ", "·") for t in (source if kind == "encoder" else target)]  # as they read
    assert view.mask == ("causal" if kind == "decoder" else "none")


def test_bad_shapes_get_bertviz_style_messages(outputs):
    out, tokens = outputs["bert"]
    batch = tuple(torch.cat([a, a]) for a in out.attentions)  # (2, H, n, n) per layer
    with pytest.raises(ValueError, match="batch of 2; draw one example at a time"):
        head_view(batch, tokens)
    with pytest.raises(ValueError, match="4 dimensions. Make sure you set output_attentions=True"):
        head_view(tuple(a[0] for a in out.attentions), tokens)
    with pytest.raises(ValueError, match="returned no attention weights. Make sure you set output_attentions=True"):
        head_view(None, tokens)
    with pytest.raises(ValueError, match='is empty.+attn_implementation="eager".+outputs.attentions'):
        head_view((), tokens)
    with pytest.raises(ValueError, match=f"{len(tokens) - 1} tokens for weights over {len(tokens)} positions"):
        model_view(out.attentions, tokens[:-1])
    with pytest.raises(ValueError, match="one token per position"):
        model_view(out.attentions, " ".join(tokens))
    with pytest.raises(ValueError, match="do not sum to 1"):
        head_view(tuple(a * 3 for a in out.attentions), tokens)
    with pytest.raises(ValueError, match="sentence_b_start must be a position from 1"):
        head_view(out.attentions, tokens, sentence_b_start=len(tokens))
    t5, source, target = outputs["t5"]
    with pytest.raises(ValueError, match="kind='cross' draws cross_attention, which was not given"):
        model_view(encoder_attention=t5.encoder_attentions, encoder_tokens=source, kind="cross")
    with pytest.raises(ValueError, match="self-attention is square"):
        model_view(t5.cross_attentions, target)


def test_bertvizs_readme_calls_as_pasted(outputs, tmp_path):
    """bertviz's README, call for call (layer and head numbers fitted to a 2-layer, 3-head model), including the
    positional sentence_b_start, display_mode, include_layers and include_heads, layer and heads, and
    html_action='return' written to a file."""
    out, tokens = outputs["bert"]
    attention = out.attentions
    model_view(attention, tokens)
    head_view(attention, tokens)
    assert model_view(attention, tokens, display_mode="light").layer == 0
    view = model_view(attention, tokens, 3)  # sentence_b_start, by position
    assert view.data["title"].endswith("sentence B from token #3")
    view = head_view(attention, tokens, 3)
    assert view.data["title"].endswith("sentence B from token #3")

    view = model_view(attention, tokens, include_layers=[1])  # README: include_layers=[5, 6]
    assert (view.run.layers, view.run.heads, view.names) == (1, 3, ([1], [0, 1, 2]))
    assert view.atlas["layer_names"] == [1] and view.data["title"].startswith("Layer 1, head 0")
    np.testing.assert_allclose(view.weights, attention[1][0, 0].numpy(), atol=1e-6)
    view = model_view(attention, tokens, include_layers=[0, 1], include_heads=[2, 0])
    assert view.atlas["head_names"] == [2, 0]
    view.layer, view.head = 1, 1  # the second drawn head: the model's head 0
    np.testing.assert_allclose(view.weights, attention[1][0, 0].numpy(), atol=1e-6)

    view = head_view(attention, tokens, layer=1, heads=[2, 0])  # README: layer=2, heads=[3,5]
    assert (view.layer, view.head) == (1, 2)
    np.testing.assert_allclose(view.weights, attention[1][0, 2].numpy(), atol=1e-6)
    with pytest.raises(ValueError, match=r"layer 0 is not among those drawn: \[1\]"):
        head_view(attention, tokens, layer=0, include_layers=[1])

    html_head_view = head_view(attention, tokens, html_action="return")
    with open(tmp_path / "head_view.html", "w") as file:
        file.write(html_head_view.data)
    page = (tmp_path / "head_view.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and '"layer": 0' in page and "http" not in page.split("<script")[0]
    assert model_view(attention, tokens, html_action="return").data == view_page(attention, tokens)

    t5, source, target = outputs["t5"]
    view = model_view(
        encoder_attention=t5.encoder_attentions,
        decoder_attention=t5.decoder_attentions,
        cross_attention=t5.cross_attentions,
        encoder_tokens= source,
        decoder_tokens = target
    )
    np.testing.assert_allclose(view.weights, t5.encoder_attentions[0][0, 0].numpy(), atol=1e-6)


def view_page(attention, tokens) -> str:
    return model_view(attention, tokens).html_page()


@pytest.mark.parametrize("call, message", [
    (lambda a, t: model_view(a, t, html_action="show"), "html_action must be 'view' or 'return'"),
    (lambda a, t: model_view(a, t, display_mode="blue"), "display_mode must be 'dark' or 'light'"),
    (lambda a, t: model_view(a, t, include_layers=[2]), "include_layers holds 2; the model has 2"),
    (lambda a, t: model_view(a, t, include_heads=[]), "include_heads is empty"),
    (lambda a, t: model_view(a, t, include_heads=[0, 0]), "names an index twice"),
    (lambda a, t: head_view(a, t, include_layers="1"), "include_layers should be a list"),
])
def test_bertvizs_options_out_of_range_get_a_message(outputs, call, message):
    out, tokens = outputs["bert"]
    with pytest.raises(ValueError, match=message):
        call(out.attentions, tokens)


def test_prettify_tokens_as_bertviz_reads_it(outputs):
    out, tokens = outputs["gpt2"]
    assert any("Ġ" in t for t in tokens)
    assert not any("Ġ" in r for r in model_view(out.attentions, tokens).data["rows"])
    assert any("Ġ" in r for r in model_view(out.attentions, tokens, prettify_tokens=False).data["rows"])


def test_bertvizs_recipe_with_transformers_defaults_says_what_to_change(outputs):
    """The recipe as bertviz's README pastes it, under the pinned transformers: SDPA (the default) returns no weights,
    and outputs[-1] of BertModel is cross_attentions, empty. Both get a message naming eager attention and
    outputs.attentions; the whole output is taken as it is."""
    import transformers as T

    folder = outputs["bert folder"]
    tokenizer = T.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    inputs = torch.tensor([tokenizer(TEXT)["input_ids"]])
    tokens = tokenizer.convert_ids_to_tokens(inputs[0])
    sdpa = T.AutoModel.from_pretrained(str(folder)).eval()
    assert sdpa.config._attn_implementation == "sdpa"
    with torch.no_grad():
        sdpa_out = sdpa(inputs, output_attentions=True)
    for attention in (sdpa_out[-1], sdpa_out.attentions, sdpa_out):
        with pytest.raises(ValueError, match=r'attn_implementation="eager".+pass outputs\.attentions'):
            model_view(attention, tokens)
    pasted = T.AutoModel.from_pretrained(str(folder), output_attentions=True).eval()  # README: eager follows
    with torch.no_grad():
        eager = pasted(inputs)
    assert eager[-1] == ()  # outputs[-1] is cross_attentions
    with pytest.raises(ValueError, match=r"outputs\[-1\] is cross_attentions"):
        head_view(eager[-1], tokens)
    whole = model_view(eager, tokens)  # the whole output: its attentions
    np.testing.assert_allclose(whole.weights, eager.attentions[0][0, 0].numpy(), atol=1e-6)
