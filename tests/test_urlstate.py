import pytest

from attnviz.urlstate import (Param, beyond, boolean, bounded_text, choice, encode_bool, encode_int_list, encode_params, int_list,
                              int_range, nearest, parse_params, text)

SCHEMA = {
    "text": Param("hello", text),
    "scoring": Param("dot", choice(["dot", "cosine"])),
    "temp": Param(1.0, nearest([0.1, 1.0, 10.0])),
    "heads": Param(1, int_range(1, 8)),
    "hard": Param(False, boolean, encode_bool),
    "hide": Param([], int_list, encode_int_list),
}


def test_round_trip():
    values = {"text": "a <b> & c", "scoring": "cosine", "temp": 10.0, "heads": 3, "hard": True, "hide": [1, 4]}
    assert parse_params(encode_params(values, SCHEMA), SCHEMA) == values


def test_defaults_are_left_out_of_links():
    defaults = {name: p.default for name, p in SCHEMA.items()}
    assert encode_params(defaults, SCHEMA) == {}


def test_malformed_values_fall_back_to_defaults():
    parsed = parse_params({"scoring": "evil", "temp": "abc", "heads": "x", "hard": "maybe", "hide": "1,x"}, SCHEMA)
    assert parsed == {"text": "hello", "scoring": "dot", "temp": 1.0, "heads": 1, "hard": False, "hide": []}


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "", " ", "0x10", "1,5"])
def test_non_numbers_nan_and_infinity_give_the_default(value):
    parsed = parse_params({"temp": value, "heads": value}, SCHEMA)
    assert parsed["temp"] == 1.0 and parsed["heads"] == 1


@pytest.mark.parametrize("value, temp, heads", [
    ("0.3", 0.1, 1), ("-5", 0.1, 1), ("1e300", 10.0, 8), ("99", 10.0, 8), ("4.4", 1.0, 4), ("4.6", 1.0, 5),
    ("100000000000000000000000000", 10.0, 8), ("0", 0.1, 1),
])
def test_finite_numbers_give_the_nearest_allowed_value(value, temp, heads):
    parsed = parse_params({"temp": value, "heads": value}, SCHEMA)
    assert (parsed["temp"], parsed["heads"]) == (temp, heads)


def test_stepped_integers_snap_to_a_step():
    parse = int_range(0, 20000, step=500)
    assert [parse(v) for v in ("1234", "1250.1", "-3", "19999", "7e9")] == [1000, 1500, 0, 20000, 20000]


def test_text_is_cut_to_what_its_box_accepts():
    assert bounded_text(5)("abcdefgh") == "abcde" and bounded_text(5)("ab") == "ab"


def test_a_link_past_what_a_control_offers_is_named_with_what_is_used():
    from appkit.model_views import MAX_STEPS, WRITE_PARAMS

    schema = {"query": Param(0, int_range(0, 511)), "temp": Param(1.0, nearest([0.5, 1.0, 2.0])),
              "mask": Param("none", choice(["none", "causal"])), **WRITE_PARAMS}
    asked = {"query": "99999", "temp": "-3", "mask": "diagonal", "write": "1000"}
    assert beyond(asked, schema) == [("query", "99999", 511), ("temp", "-3", 0.5), ("write", "1000", MAX_STEPS)]
    assert beyond({"query": "511", "temp": "0.7", "write": "nan"}, schema) == []  # inside, snapped, or not a number


def test_self_attention_and_a_model_page_bring_a_far_position_to_their_end_and_say_so():
    from page_support import run_page

    toy = run_page("self_attention.py", {"key": "99999"})
    assert not toy.exception and toy.session_state["key"] == 4095  # as "Inside a score" closed keeps it
    assert any("key = 99,999, past what this page offers, so it shows 4,095" in c.value for c in toy.caption)
    model = run_page("trained.py", {"key": "99999"})
    assert not model.exception and model.session_state["key"] == 511
    assert any("key = 99,999, past what this page offers, so it shows 511" in c.value for c in model.caption)
    assert not any("past what this page offers" in c.value for c in run_page("self_attention.py", {"key": "3"}).caption)
