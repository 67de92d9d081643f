"""The community's per-head files (attnviz.models.head_files), both ways: files written as each repository writes and
documents them (DuoAttention's save_model, MInference's configs, Retrieval_Head's head_score) are read into numbers
per head; a census written in each layout is read back by each repository's own loading code, written out here; a
file that is not in its layout gets a message."""

import json

import numpy as np
import pytest

from attnviz.models import census as heads_census
from attnviz.models import head_files
from test_census import RULES, synthetic  # noqa: F401  the five synthetic heads, a fixture


@pytest.fixture(scope="module")
def found(synthetic):  # noqa: F811
    scan, _ = synthetic
    return heads_census.census(scan, RULES, wu=np.array([[0.0, 0.05, 0.0, 0.9, 0.0]])), scan


def test_duoattentions_tsv_as_its_training_writes_it_is_read_and_ours_loads_as_it_loads_one(found, tmp_path):
    gates = np.array([[0.12345, 1.0, 0.0], [0.5, 0.999, 1.2]])  # its sigmoid gates, one line a layer
    written = "".join("\t".join(f"{v:.10f}" for v in row) + "\n" for row in gates)  # as duo-attention's save_model
    np.testing.assert_allclose(head_files.read_duo_tsv(written), np.clip(gates, 0, 1))
    c, _ = found
    path = tmp_path / "full_attention_heads.tsv"
    path.write_text(head_files.duo_tsv(c))
    loaded = np.clip(np.loadtxt(path, dtype=float, delimiter="\t"), 0, 1)  # as DuoAttention's load_attn_pattern
    np.testing.assert_allclose(loaded.reshape(1, -1), c.distant, atol=1e-9)  # one key/value head a query head here
    assert json.loads(head_files.duo_config(c)) == {"sink_size": RULES.sinks, "recent_size": RULES.recent}


def test_minferences_best_pattern_json_is_read_and_ours_has_its_shape(found):
    theirs = json.dumps([{"0": ["vertical_and_slash", 1000, 6096, 0.981], "1": ["stream_llm", 100, 800, 0.5]},
                         {"0": ["block_sparse", 100, 64, 0.7], "1": ["vertical_and_slash", 30, 800, 0.998]}])
    pattern, score = head_files.read_minference_json(theirs)
    assert [[heads_census.PATTERNS[p] for p in row] for row in pattern] == [["vertical_slash", "a_shape"],
                                                                            ["block_sparse", "vertical_slash"]]
    np.testing.assert_allclose(score, [[0.981, 0.5], [0.7, 0.998]])
    c, scan = found
    ours = json.loads(head_files.minference_json(c, scan.block))
    assert len(ours) == 1 and set(ours[0]) == {"0", "1", "2", "3", "4"}
    for head, (name, first, second, recall) in ours[0].items():  # as MInference reads an entry
        assert name in ("stream_llm", "vertical_and_slash", "block_sparse") and first > 0 and second > 0
        assert recall == round(float(c.recalls[heads_census.PATTERNS[c.best_pattern[0, int(head)]]][0, int(head)]), 3)
    assert ours[0]["2"][:3] == ["stream_llm", RULES.sinks, RULES.budget - RULES.sinks]  # the streaming head
    back, _ = head_files.read_minference_json(json.dumps(ours))
    assert (back == c.best_pattern).all()


def test_retrieval_heads_score_file_is_read_by_its_mean_and_ours_loads_as_its_scripts_load_one(found):
    theirs = '{"0-0": [0.0, 0.5], "1-2": [1.0, 1.0, 0.4], "0-1": [0.2]}'  # one line, "layer-head": each detection
    np.testing.assert_allclose(head_files.read_retrieval_head_json(theirs), [[0.25, 0.2, 0.0], [0.0, 0.0, 0.8]])
    c, _ = found
    line = head_files.retrieval_head_json(c.wu)
    assert "\n" not in line
    head_list = json.loads(line)  # as its print_top_head.py reads one
    scores = {tuple(int(x) for x in key.split("-")): np.mean(values) for key, values in head_list.items()}
    assert max(scores, key=scores.get) == (0, 3) and scores[0, 3] == pytest.approx(0.9)
    np.testing.assert_allclose(head_files.read_retrieval_head_json(line, 1, 5), c.wu)


@pytest.mark.parametrize("reader, text, said", [
    (head_files.read_duo_tsv, "", "no rows"),
    (head_files.read_duo_tsv, "0.1\t0.2\n0.3\n", "different numbers of values"),
    (head_files.read_duo_tsv, "0.1\t<b>x</b>\n", "not a number"),
    (head_files.read_duo_tsv, "0.1\tnan\n", "not finite"),
    (head_files.read_duo_tsv, b"\xff\xfe", "not UTF-8"),
    (head_files.read_minference_json, "{", "not JSON"),
    (head_files.read_minference_json, '{"0": 1}', "not a MInference best-pattern list"),
    (head_files.read_minference_json, '[{"0": ["magic", 1, 2, 0.5]}]', "the pattern one of"),
    (head_files.read_minference_json, '[{"0": ["stream_llm", 1, 2, 0.5]}, {"0": [], "1": []}]', "different numbers"),
    (head_files.read_minference_json, '[{"x": ["stream_llm", 1, 2, 0.5]}]', "names a head 'x'"),
    (head_files.read_retrieval_head_json, "[]", "not a Retrieval_Head score file"),
    (head_files.read_retrieval_head_json, '{"a-b": [1]}', "names them \"layer-head\""),
    (head_files.read_retrieval_head_json, '{"0-0": "high"}', "not a list of numbers"),
])
def test_a_file_not_in_its_layout_gets_a_message(reader, text, said):
    with pytest.raises(ValueError) as error:
        reader(text)
    assert said in str(error.value)


def test_another_models_file_is_told_apart():
    with pytest.raises(ValueError, match="another model's"):
        head_files.read_retrieval_head_json('{"40-3": [1.0]}', 30, 9)


def test_a_papers_file_is_set_beside_this_document_head_by_head(found):
    """head_files.beside: each layout, as its repository writes it, beside the census of the five synthetic heads
    (previous, local, streaming, retrieval, dense; one key/value head each): the file's numbers as the file says
    them, the document's as the census measured them, and where the two agree, counted in the sentence."""
    c, _ = found
    classes = [heads_census.CLASSES[k] for k in c.classify()[0]]
    assert classes == ["previous", "local", "streaming", "retrieval", "dense"]
    duo = "".join("\t".join(f"{v:.10f}" for v in row) + "\n" for row in [[0.0, 0.1, 0.0, 0.97, 0.8]])
    shown = head_files.beside(c, "full_attention_heads.tsv", duo.encode())
    np.testing.assert_allclose(shown.said, [[0.0, 0.1, 0.0, 0.97, 0.8]], atol=1e-9)
    np.testing.assert_allclose(shown.shown, np.clip(c.distant, 0, 1))
    assert shown.agree.tolist() == [[True, True, True, True, False]]  # the dense head: a gate of 0.8, no retrieval
    assert "2 of 5 heads a gate of 0.5 or more" in shown.sentence and "1 is both" in shown.sentence
    minference = json.dumps([{"0": ["vertical_and_slash", 30, 90, 0.9], "1": ["vertical_and_slash", 30, 90, 0.95],
                              "2": ["stream_llm", 4, 124, 1.0], "3": ["block_sparse", 2, 64, 0.6],
                              "4": ["stream_llm", 4, 124, 0.2]}])
    shown = head_files.beside(c, "Qwen_best_pattern.json", minference)
    chosen = ["vertical_slash", "vertical_slash", "a_shape", "block_sparse", "a_shape"]
    np.testing.assert_allclose(shown.shown[0], [c.recalls[p][0, h] for h, p in enumerate(chosen)])
    np.testing.assert_allclose(shown.said, [[0.9, 0.95, 1.0, 0.6, 0.2]])
    best = [heads_census.PATTERNS[p] for p in c.best_pattern[0]]
    assert shown.agree[0].tolist() == [b == p for b, p in zip(best, chosen)]
    assert f"the file's for {sum(b == p for b, p in zip(best, chosen))} of 5 heads" in shown.sentence
    shown = head_files.beside(c, "model.json", '{"0-3": [1.0, 0.8], "0-4": [0.05]}')
    np.testing.assert_allclose(shown.said, [[0.0, 0.0, 0.0, 0.9, 0.05]])
    np.testing.assert_allclose(shown.shown, c.wu)  # the needle lab's scores, where it ran
    assert shown.agree.all() and "1 of 5 heads a retrieval score of 0.1 or more" in shown.sentence


@pytest.mark.parametrize("name, text, said", [
    ("full_attention_heads.tsv", "0.5\t0.5\n0.5\t0.5\n", "another model's: 2 layers × 2 key/value heads, where this "
                                                         "model has 1 × 5"),
    ("best.json", json.dumps([{"0": ["stream_llm", 4, 124, 1.0]}]), "another model's: 1 layers × 1 heads"),
    ("scores.json", '{"3-0": [1.0]}', "another model's"),
    ("empty.json", "   ", "This file is empty"),
    ("x.json", b"\xff", "not UTF-8"),
])
def test_a_file_of_another_model_or_none_gets_a_message_beside_this_document(found, name, text, said):
    with pytest.raises(ValueError) as error:
        head_files.beside(found[0], name, text)
    assert said in str(error.value)
