from attnviz.urlstate import Param, boolean, choice, encode_bool, encode_int_list, encode_params, int_list, int_range, nearest, parse_params, text

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
    parsed = parse_params({"scoring": "evil", "temp": "abc", "heads": "99", "hard": "maybe", "hide": "1,x"}, SCHEMA)
    assert parsed == {"text": "hello", "scoring": "dot", "temp": 1.0, "heads": 1, "hard": False, "hide": []}
    assert parse_params({"temp": "0.3"}, SCHEMA)["temp"] == 0.1
