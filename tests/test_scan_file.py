"""The scan's open file (attnviz.scan_file, docs/scan-file.md): read with the safetensors package alone, a tile's
exact weights recomputed as exp(s − lse) from scores written out of transformers' own modules equal transformers'
eager attentions; attnviz's reader gives back what the scan holds; a file that is not one gets a message."""

import hashlib
import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: no hub access, ever

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attnviz import models  # noqa: E402
from attnviz import scan_file  # noqa: E402

TEXT = " ".join(f"The pass key is {k}. The grass is green, the sky is blue." for k in range(22))


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    from test_scan import build

    folder = build("gpt2", tmp_path_factory.mktemp("scanfile"))
    return folder, models.load(folder, device="cpu")


@pytest.fixture(scope="module")
def written(gpt2):
    _, model = gpt2
    scan = model.scan(TEXT, block=64, strongest=5)
    return scan, scan_file.write(scan, model)


def gpt2_scores(folder, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(scores (L, H, n, n) float64, −inf above the diagonal; transformers' eager weights (L, H, n, n)): each layer's
    q·k/√dh from its own c_attn, hooked, and its output_attentions."""
    import transformers as T

    reference = T.GPT2Model.from_pretrained(folder, attn_implementation="eager").eval().double()
    heads = reference.config.n_head
    caught = []
    hooks = [block.attn.c_attn.register_forward_hook(lambda _m, _i, out: caught.append(out[0]))
             for block in reference.h]
    with torch.no_grad():
        out = reference(torch.tensor([ids]), output_attentions=True)
    for hook in hooks:
        hook.remove()
    n, d = len(ids), reference.config.n_embd
    scores = []
    for qkv in caught:
        query, key = (qkv[:, i * d:(i + 1) * d].view(n, heads, -1).transpose(0, 1) for i in (0, 1))  # (H, n, dh)
        s = query @ key.transpose(-1, -2) / np.sqrt(query.shape[-1])  # (H, n, n)
        scores.append(s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf")).numpy())
    return np.stack(scores), torch.stack(out.attentions)[:, 0].numpy()


def test_a_file_read_with_safetensors_alone_gives_any_tiles_exact_weights_from_the_model_and_the_text(gpt2, written,
                                                                                                       tmp_path):
    from safetensors import safe_open

    folder, _ = gpt2
    scan, data = written
    path = tmp_path / "scan.safetensors"
    path.write_bytes(data)
    with safe_open(str(path), framework="numpy") as f:  # the container's own package, nothing of attnviz
        meta = f.metadata()
        arrays = {name: f.get_tensor(name) for name in f.keys()}
    ids = arrays["ids"].tolist()
    assert meta["format"] == "attnviz-scan" and meta["layout"] == "1" and int(meta["n"]) == len(ids) > 400
    assert meta["text_sha256"] == hashlib.sha256(scan.pieces.text.encode()).hexdigest()
    assert len(json.loads(meta["pieces"])) == len(ids) and set(json.loads(meta["definitions"])) >= set(arrays)
    scores, eager = gpt2_scores(folder, ids)
    lse = arrays["lse"]  # (L, H, n) float64
    for layer, head, rows, cols in ((0, 1, slice(0, 64), slice(0, 64)), (1, 2, slice(300, 380), slice(100, 300)),
                                    (1, 0, slice(len(ids) - 30, len(ids)), slice(0, len(ids)))):
        tile = np.exp(scores[layer, head, rows, cols] - lse[layer, head, rows, None])  # w = exp(s − lse)
        np.testing.assert_allclose(tile, eager[layer, head, rows, cols], atol=2e-6, rtol=1e-5)
    # the summaries against the same eager weights, from the file alone
    np.testing.assert_allclose(arrays["sink"], eager[:, :, 1:, 0].mean(-1), atol=1e-5)
    picked = np.take_along_axis(eager, arrays["strongest_keys"].astype(np.int64), -1)  # the named keys carry those weights
    np.testing.assert_allclose(picked, arrays["strongest_weights"], atol=1e-5)
    entropy = -(eager * np.log(np.where(eager > 0, eager, 1))).sum(-1)  # (L, H, n)
    np.testing.assert_allclose(arrays["entropy"], entropy, atol=1e-4)


def test_attnvizs_reader_gives_back_what_the_scan_holds_and_a_tile_from_its_scores(written):
    scan, data = written
    found = scan_file.read(data)
    for name, held in (("overview", scan.overview), ("sink", scan.sink), ("entropy", scan.entropy),
                       ("strongest_keys", scan.strongest_keys), ("strongest_weights", scan.strongest_weights), ("lse", scan.normalisers)):
        assert found.arrays[name].dtype == held.dtype and np.array_equal(found.arrays[name], held), name
    assert found.ids.tolist() == list(scan.pieces.ids) and found.meta["pieces"] == scan.pieces.labels()
    assert found.meta["model"] == scan.model and found.meta["block"] == "64" and found.meta["attnviz"]
    assert len(found.meta["revision"]) == 16  # the model's files' digest (heads.model_key)
    from attnviz.models import census

    taken = census.census(scan)  # the census inside, as the library takes it
    assert found.meta["census_classes"] == list(census.CLASSES) and found.meta["census_rules"]["recent"] == 256
    assert np.array_equal(found.arrays["census.class"], taken.classify())
    for name in ("sink", "distant", "a_shape", "block_sparse"):
        source = taken.recalls[name] if name in taken.recalls else getattr(taken, name)
        assert np.array_equal(found.arrays[f"census.{name}"], source.astype(np.float32)), name
    assert np.array_equal(found.arrays["slashes"], scan.slashes) and np.array_equal(found.arrays["verticals"], scan.verticals)
    rows, cols = range(200, 264), range(0, 264)
    query = scan.queries[1][2, rows.start:rows.stop].double()  # (r, dh), already scaled by 1/√dh
    key = scan.keys[1][2, cols.start:cols.stop].double()  # (c, dh)
    scores = (query @ key.T).numpy()
    scores[np.arange(cols.stop)[None, :] > np.arange(rows.start, rows.stop)[:, None]] = -np.inf
    np.testing.assert_allclose(found.weights(1, 2, rows, scores), scan.tile(1, 2, rows, cols), atol=1e-6)


def test_what_is_not_a_scan_file_gets_a_message(written, tmp_path):
    from safetensors.numpy import save

    _, data = written
    header = scan_file.header(data)
    meta = header["__metadata__"]
    cases = [
        (b"", "shorter than a safetensors header"),
        (b"\xff" * 64, "header's length points past the file"),
        (b"\x04\x00\x00\x00\x00\x00\x00\x00nope", "not JSON"),
        (save({"x": np.zeros(3, np.float32)}), "no metadata"),
        (save({"x": np.zeros(3, np.float32)}, metadata={"format": "<b>other</b>"}), "its format is '<b>other</b>'"),
        (save({"x": np.zeros(3, np.float32)}, metadata={**meta, "layout": "99"}), "layout '99'"),
        (save({"x": np.zeros(3, np.float32)}, metadata=meta), "has no overview"),
        (save({**{k: v for k, v in scan_file.read(data).arrays.items()}, "ids": np.zeros(3, np.int64)}, metadata=meta),
         "ids is (3,)"),
        (save(scan_file.read(data).arrays, metadata={**meta, "n": "lots"}), "in whole numbers"),
        (save(scan_file.read(data).arrays, metadata={**meta, "pieces": "[1, 2"}), "pieces are not JSON"),
    ]
    for bad, said in cases:
        with pytest.raises(ValueError, match=None) as error:
            scan_file.read(bad)
        assert said in str(error.value), (said, str(error.value))
    path = tmp_path / "scan.safetensors"
    path.write_bytes(data)
    assert scan_file.read(path).meta["n"] == meta["n"]  # from a path as from bytes
