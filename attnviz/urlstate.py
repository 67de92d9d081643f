"""URL query parameters <-> control values, so a copied link reproduces a view. No streamlit here.

A schema maps each parameter name to a Param. Parsing never raises: a missing or malformed value
falls back to the default, so a hand-edited link still opens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Param:
    default: Any
    parse: Callable[[str], Any]
    encode: Callable[[Any], str] = str


def choice(options) -> Callable[[str], Any]:
    options = tuple(options)

    def parse(text: str):
        if text not in options:
            raise ValueError(text)
        return text

    return parse


def nearest(options) -> Callable[[str], float]:
    """A float snapped to the nearest offered option (a slider's steps)."""
    options = tuple(options)
    return lambda text: min(options, key=lambda o: abs(o - float(text)))


def int_range(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise ValueError(text)
        return value

    return parse


def boolean(text: str) -> bool:
    if text not in ("0", "1", "true", "false"):
        raise ValueError(text)
    return text in ("1", "true")


def encode_bool(value: bool) -> str:
    return "1" if value else "0"


def int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def encode_int_list(values) -> str:
    return ",".join(str(v) for v in values)


def text(value: str) -> str:
    return value


def parse_params(params: Mapping[str, str], schema: Mapping[str, Param]) -> dict[str, Any]:
    """Values for every name in the schema: parsed from params where valid, else the default."""
    values = {}
    for name, param in schema.items():
        try:
            values[name] = param.parse(params[name]) if name in params else param.default
        except (ValueError, TypeError, OverflowError):
            values[name] = param.default
    return values


def encode_params(values: Mapping[str, Any], schema: Mapping[str, Param]) -> dict[str, str]:
    """The query parameters for `values`; defaults are left out to keep links short."""
    return {name: param.encode(values[name]) for name, param in schema.items() if values[name] != param.default}
