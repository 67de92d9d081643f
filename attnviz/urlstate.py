"""URL query parameters <-> control values, so a copied link reproduces a view. No streamlit here.

A schema maps each parameter name to a Param. Parsing never raises, so a hand-edited link still opens:
a missing value, a non-number, NaN or infinity gives the default; a finite number outside what the control
offers gives the nearest value it does offer.
"""

from __future__ import annotations

import math
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


def number(text: str) -> float:
    """A finite float; ValueError for anything else (NaN, inf, 1e400, words)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def nearest(options) -> Callable[[str], float]:
    """A number snapped to the nearest offered option (a select slider's steps)."""
    options = tuple(options)
    low, high = min(options), max(options)

    def parse(text: str) -> float:
        value = min(max(number(text), low), high)  # clamped first: from 1e300 every option is equally far
        return min(options, key=lambda o: abs(o - value))

    parse.bounds = (low, high)
    return parse


def int_range(low: int, high: int, step: int = 1) -> Callable[[str], int]:
    """A number rounded to the nearest low + k·step, then clamped into [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)  # exact for integers of any size
        except ValueError:
            value = number(text)
        k = round((min(max(value, low), high) - low) / step)
        return min(low + k * step, high)

    parse.bounds = (low, high)
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


def bounded_text(limit: int) -> Callable[[str], str]:
    """Text cut to the first `limit` characters, the most its box accepts."""
    return lambda value: value[:limit]


def parse_params(params: Mapping[str, str], schema: Mapping[str, Param]) -> dict[str, Any]:
    """Values for every name in the schema: parsed from params where valid, else the default."""
    values = {}
    for name, param in schema.items():
        try:
            values[name] = param.parse(params[name]) if name in params else param.default
        except (ValueError, TypeError, OverflowError):
            values[name] = param.default
    return values


def beyond(params: Mapping[str, str], schema: Mapping[str, Param]) -> list[tuple[str, str, Any]]:
    """(name, the link's text, the value used) for each number in `params` outside what its control offers (its
    Param's bounds), which parse_params brings to the nearest end: what a page says it did not show as asked."""
    found = []
    for name, param in schema.items():
        bounds = getattr(param.parse, "bounds", None)
        if bounds is None or name not in params:
            continue
        try:
            asked = number(params[name])
        except (ValueError, TypeError, OverflowError):
            continue  # not a number: the default, as parse_params gives it
        if not bounds[0] <= asked <= bounds[1]:
            found.append((name, params[name], param.parse(params[name])))
    return found


def encode_params(values: Mapping[str, Any], schema: Mapping[str, Param]) -> dict[str, str]:
    """The query parameters for `values`; defaults are left out to keep links short."""
    return {name: param.encode(values[name]) for name, param in schema.items() if values[name] != param.default}


def coerce(values: Mapping[str, Any], schema: Mapping[str, Param]) -> dict[str, Any]:
    """Typed values from elsewhere (the browser's interactive views) checked as a link's values are: each name of
    `values` that the schema has goes through its Param's encode and parse; one that fails gets the default."""
    checked = {}
    for name in values.keys() & schema.keys():
        param = schema[name]
        try:
            checked[name] = param.parse(param.encode(values[name]))
        except (ValueError, TypeError, OverflowError, AttributeError):
            checked[name] = param.default
    return checked
