import numpy as np
import pandas as pd
import pytest

from attnviz.retrieval import (
    PRESETS, RecordError, clean_records, encode, entropy_curve, ngram_vector, parse_csv, pca_2d, records_frame, retrieve,
    value_matrix,
)


def run(preset, query, tau=1.0, glove=None, **overrides):
    pairs, encoder, similarity, kind, _ = PRESETS[preset]
    keys, values = [k for k, _ in pairs], [v for _, v in pairs]
    V, columns = value_matrix(values, kind, glove)
    options = dict(encoder=encoder, similarity=similarity, temperature=tau, sigma=0.25, kv=glove) | overrides
    return retrieve([query], keys, V, **options), keys, values, columns


def test_surnames_exact_hard_soft():
    result, keys, values, columns = run("Surnames → first names", "Li")
    assert result.exact == [2]
    assert result.hard_weights[0].argmax() == 2 and result.hard_weights.sum() == 1
    # "Lipt" is no key: exact finds nothing, hard and soft both pick Lipton.
    result, *_ = run("Surnames → first names", "Lipt")
    assert result.exact == []
    assert keys[result.hard_weights[0].argmax()] == "Lipton"
    assert values[int(result.soft_output[0].argmax())] == "Zachary"


def test_country_capital_by_glove(glove):
    result, keys, values, _ = run("Country → capital", "france", glove=glove)
    assert result.exact == [0] and keys[result.hard_weights[0].argmax()] == "france"
    result, *_ = run("Country → capital", "greece", tau=0.05, glove=glove)
    assert result.exact == []
    cosines = [glove.similarity("greece", k) for k in keys]  # gensim's own cosine, computed apart
    assert result.hard_weights[0].argmax() == int(np.argmax(cosines))
    np.testing.assert_allclose(result.scores[0], cosines, rtol=1e-5)


def test_word_class_probabilities(glove):
    result, keys, values, columns = run("Word → class", "pear", tau=0.1, glove=glove)
    probabilities = result.soft_output[0]
    assert columns == ["fish", "fruit", "vegetable"]
    np.testing.assert_allclose(probabilities.sum(), 1, rtol=1e-5)
    assert columns[int(probabilities.argmax())] == "fruit"
    np.testing.assert_allclose(probabilities, [result.soft_weights[0][[v == c for v in values]].sum() for c in columns], rtol=1e-5)


@pytest.mark.parametrize("tau", [0.01, 0.1, 1.0, 10.0])
def test_soft_weights_sum_to_one_and_numeric_output_in_range(tau):
    result, keys, values, _ = run("GPA → starting salary", "3.4", tau=tau)
    np.testing.assert_allclose(result.soft_weights.sum(-1), 1, rtol=1e-5)
    salaries = [float(v) for v in values]
    assert min(salaries) <= result.soft_output[0, 0] <= max(salaries)
    np.testing.assert_allclose(result.soft_output[0, 0], np.dot(result.soft_weights[0], salaries), rtol=1e-5)


def test_tiny_tau_equals_hard_and_huge_tau_equals_mean():
    cold, keys, values, _ = run("GPA → starting salary", "3.45", tau=1e-4)
    np.testing.assert_allclose(cold.soft_weights, cold.hard_weights, atol=1e-6)
    assert keys[cold.hard_weights[0].argmax()] == "3.5"
    hot, *_ = run("GPA → starting salary", "3.4", tau=1e6)
    np.testing.assert_allclose(hot.soft_output[0, 0], np.mean([float(v) for v in values]), rtol=1e-4)


def test_multi_query_matrix():
    pairs = PRESETS["Surnames → first names"][0]
    keys = [k for k, _ in pairs]
    V, _ = value_matrix([v for _, v in pairs], "text")
    result = retrieve(["Li", "Smol", "Werner"], keys, V, encoder="ngram", similarity="cosine", temperature=0.1)
    assert result.soft_weights.shape == (3, 6)
    assert [keys[i] for i in result.hard_weights.argmax(-1)] == ["Li", "Smola", "Werness"]


def test_ngram_ranks_a_names_prefix_closest_to_that_name():
    names = ["Zhang", "Lipton", "Li", "Smola", "Hu", "Werness", "Alexander", "Rachel"]
    vectors, _ = encode(names, "ngram")
    for name in names:
        prefix = name[: max(2, len(name) - 2)]
        similarities = vectors @ ngram_vector(prefix)
        assert names[int(similarities.argmax())] == name, (name, prefix)


def test_duplicate_keys_each_get_weight():
    V, _ = value_matrix(["1", "2"], "numeric")
    result = retrieve(["a"], ["a", "a"], V, encoder="ngram", similarity="cosine", temperature=1.0)
    np.testing.assert_allclose(result.soft_weights, [[0.5, 0.5]])
    assert result.exact == [0, 1]


def test_entropy_curve_goes_from_zero_to_ln_n():
    curve = entropy_curve(np.array([3.0, 1.0, 0.0, -1.0]), np.array([1e-3, 1.0, 1e4]))
    assert curve[0] < 1e-6 and abs(curve[2] - np.log(4)) < 1e-4 and 0 < curve[1] < np.log(4)


def test_bad_tables_say_what_is_wrong():
    with pytest.raises(RecordError, match="empty"):
        clean_records(records_frame([]), numeric_keys=False, numeric_values=False)
    with pytest.raises(RecordError, match="Row 2 has an empty key"):
        clean_records(records_frame([("a", "1"), ("", "2")]), numeric_keys=False, numeric_values=False)
    with pytest.raises(RecordError, match="'abc' is not a number"):
        clean_records(records_frame([("1", "1"), ("2", "abc")]), numeric_keys=True, numeric_values=True)
    for huge in ("1e20", "1e308", "-1e16", "1e400", "inf", "nan"):
        with pytest.raises(RecordError, match=f"'{huge}' is not a number from -1e15 to 1e15"):
            clean_records(records_frame([("1", "1"), ("2", huge)]), numeric_keys=True, numeric_values=True)


def test_the_largest_allowed_numbers_give_finite_weights_and_outputs():
    keys, values = ["-1e15", "0", "1e15"], np.array([[1e15], [-1e15], [1e15]], np.float32)
    for similarity in ("scaled_dot", "cosine", "gaussian"):
        result = retrieve(["1e15"], keys, values, encoder="numeric", similarity=similarity, temperature=0.01, sigma=0.05)
        for array in (result.scores, result.soft_weights, result.soft_output, result.hard_output):
            assert np.isfinite(array).all(), similarity
        assert np.isfinite(pca_2d(np.vstack([result.key_vectors, result.query_vectors]))).all()
    table = clean_records(pd.DataFrame({"key": ["a", None, " b "], "value": ["x", None, "y"]}), numeric_keys=False, numeric_values=False)
    assert table.key.tolist() == ["a", "b"]


def test_csv_parsing():
    assert parse_csv(b"key,value\nZhang,Aston\nLi,Mu\n").values.tolist() == [["Zhang", "Aston"], ["Li", "Mu"]]
    with pytest.raises(RecordError, match="two columns"):
        parse_csv(b"just one column\n")
    with pytest.raises(RecordError, match="limit"):
        parse_csv(b"a,b\n" * 400_000)


def test_half_filled_rows_are_found_after_stripping():
    import pandas as pd

    from attnviz.retrieval import half_filled

    frame = pd.DataFrame({"key": ["a", " ", "c", None, ""], "value": ["1", "2", "  ", None, ""]})
    assert half_filled(frame) == [1, 2]  # a key with no value, a value with no key; empty rows are not half filled
