"""attnviz.models.hub: a model in the local Hugging Face cache, by its hub name, with no network request. The cache is
built here as huggingface_hub writes it (blobs named by their hash, snapshots of links into them, refs naming a commit),
in a temp folder; what loads from it equals the same files loaded as a folder."""

import hashlib
import os
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tiny_models  # noqa: E402

from attnviz import cli, models  # noqa: E402
from attnviz.models import catalog, hub  # noqa: E402

TEXT = "the dog saw the dog"


def put(cache: Path, model_id: str, folder: Path, commit: str, refs: tuple[str, ...] = ("main",)) -> Path:
    """`folder`'s files as a snapshot of `model_id` at `commit` in the hub cache at `cache`, named by `refs`."""
    repo = cache / ("models--" + model_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in folder.iterdir():
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    for ref in refs:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    folders = {family: tiny_models.build(family, root / "made") for family in ("gpt2", "llama")}
    cache = root / "cache"
    put(cache, "acme/tiny-gpt2", folders["gpt2"], "a" * 40)
    put(cache, "acme/tiny-gpt2", folders["llama"], "b" * 40, refs=("v2",))  # another revision of the same name
    pickled = root / "made" / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text((folders["gpt2"] / "config.json").read_text())
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04not loaded")
    put(cache, "acme/pickled", pickled, "c" * 40)
    return cache, folders


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_a_cached_model_loads_by_its_hub_name_as_its_folder_does(cache, monkeypatch, no_network):
    root, folders = cache
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    model = models.load("acme/tiny-gpt2", "cpu")
    assert model.name == "acme/tiny-gpt2"
    run, expected = model.run(TEXT), models.load(folders["gpt2"], "cpu").run(TEXT)
    assert run.pieces.tokens == expected.pieces.tokens
    np.testing.assert_array_equal(run.weights, expected.weights)
    np.testing.assert_array_equal(run.next_logits, expected.next_logits)


def test_a_revision_by_its_ref_or_its_commit(cache, monkeypatch, no_network):
    root, folders = cache
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    llama = models.load(folders["llama"], "cpu").run(TEXT)
    for name in ("acme/tiny-gpt2@v2", "acme/tiny-gpt2@" + "b" * 40):
        np.testing.assert_array_equal(models.load(name, "cpu").run(TEXT).weights, llama.weights)
    assert models.load("acme/tiny-gpt2@main", "cpu").layers == 2


def test_the_cache_is_found_where_huggingface_hub_puts_it(tmp_path):
    assert hub.cache_dir({"HF_HUB_CACHE": str(tmp_path / "a"), "HF_HOME": "/x"}) == tmp_path / "a"
    assert hub.cache_dir({"HF_HOME": str(tmp_path / "home")}) == tmp_path / "home" / "hub"
    assert hub.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "huggingface" / "hub"
    assert hub.cache_dir({}) == Path("~/.cache/huggingface/hub").expanduser()


def test_what_is_not_in_the_cache_gets_a_message_that_says_what_is(cache, monkeypatch):
    root, _ = cache
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    with pytest.raises(models.ModelError, match="not in the Hugging Face cache at .*downloads nothing"):
        models.load("acme/absent", "cpu")
    with pytest.raises(models.ModelError, match=r"not its revision 'v9'; it holds main, v2, a{40}, b{40}"):
        models.load("acme/tiny-gpt2@v9", "cpu")
    with pytest.raises(models.ModelError, match="never from a pickle|pickle"):
        models.load("acme/pickled", "cpu")


@pytest.mark.parametrize("name", ["../etc/passwd", "acme/..", "acme/tiny-gpt2@../../x", "acme/a/b", "/acme/x", "acme/"])
def test_a_name_that_is_not_a_hub_name_is_never_looked_up_as_one(name):
    assert not hub.is_id(name)
    with pytest.raises(models.ModelError):
        hub.snapshot(name)


def test_the_server_offers_cached_models_by_name_and_checks_them_first(cache, monkeypatch, capsys):
    root, _ = cache
    environ = {"HF_HUB_CACHE": str(root)}
    offers = catalog.offers(["--model", "acme/tiny-gpt2", "--model", "acme/absent"], environ)
    assert offers["acme-tiny-gpt2"].source == "acme/tiny-gpt2" and offers["acme-tiny-gpt2"].kind == "decoder"
    assert offers["acme-absent"].kind is None
    assert hub.cached(environ) == ["acme/pickled", "acme/tiny-gpt2"]
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    assert cli.checked(["acme/tiny-gpt2", "acme/absent", "acme/pickled"]) == ["acme/tiny-gpt2"]
    said = capsys.readouterr().err
    assert "--model acme/tiny-gpt2: a decoder (gpt2)" in said and "acme/absent: will not load" in said
    assert "acme/pickled: will not load" in said
    args = cli.parser().parse_args(["--model", "acme/tiny-gpt2"])
    assert cli.command(args)[-2:] == ["--model", "acme/tiny-gpt2"]  # the app resolves the name itself


def test_one_rule_for_every_model_asked_for_by_name_it_loads_or_the_command_stops(cache, tmp_path, monkeypatch, capsys):
    """A missing path, an empty folder and a hub name the cache lacks all stop `attnviz --model` before the server
    starts, each said with why; only models --hub finds and cannot load are left out while the server starts."""
    root, _ = cache
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setattr(cli.os, "execv", lambda *args: (_ for _ in ()).throw(AssertionError("the server started")))
    empty = tmp_path / "empty"
    empty.mkdir()
    for asked, said in ((str(tmp_path / "nowhere"), "no such file or folder"), (str(empty), "will not load"),
                        ("acme/absent", "will not load")):
        with pytest.raises(SystemExit) as stopped:
            cli.main(["--model", asked])
        message = str(stopped.value.code) + capsys.readouterr().err
        assert asked in message and said in message and "AssertionError" not in message
    started = []
    monkeypatch.setattr(cli.os, "execv", lambda path, line: started.append(line))
    cli.main(["--hub"])  # acme/pickled will not load: left out, and the server starts with the rest
    assert "acme/pickled: will not load" in capsys.readouterr().err
    assert started and "acme/tiny-gpt2" in started[0] and "acme/pickled" not in started[0]
