"""Downloads: weight matrices as CSV or float32 .npy, figures as standalone HTML that works offline."""

from __future__ import annotations

import csv
import io

import numpy as np
import plotly.graph_objects as go

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CSV_BLOCK_ROWS = 256  # rows formatted at a time: a block's temporaries stay near 30 MB at 4,096 columns


def _cell(text: str) -> str:
    # A leading '=', '+', '-' or '@' makes spreadsheets run the cell as a formula.
    return "'" + text if text.startswith(_FORMULA_START) else text


def _csv_line(cells: list[str]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(cells)
    return out.getvalue().encode("utf-8")


def weights_csv(weights: np.ndarray, row_tokens: list[str], col_tokens: list[str] | None = None) -> bytes:
    """A (Tq, Tk) matrix of weights in [0, 1] as CSV: a header of key tokens, then one row per query token.

    Each weight is written with 6 significant digits in scientific notation ("2.44141e-04"), formatted by
    numpy a block of rows at a time: 4,096 × 4,096 weights take about a second, where Python's formatting
    of one number at a time took 17 s.
    """
    col_tokens = row_tokens if col_tokens is None else col_tokens
    weights = np.asarray(weights)
    if weights.size and (weights.min() < 0 or not np.isfinite(weights).all()):
        raise ValueError("weights_csv writes weights, which are finite and not negative.")
    lines = [_csv_line(["query \\ key"] + [_cell(t) for t in col_tokens]) + b"\n"]
    for start in range(0, len(weights), CSV_BLOCK_ROWS):
        block = _scientific(weights[start:start + CSV_BLOCK_ROWS])  # (rows, Tk, 12) bytes
        block[:, -1, -1] = ord("\n")  # each cell ends in ',' but a row's last, which ends the line
        for token, row in zip(row_tokens[start:start + CSV_BLOCK_ROWS], block):
            lines.append(_csv_line([_cell(token)]) + b"," + row.tobytes())
    return b"".join(lines)


def _scientific(block: np.ndarray) -> np.ndarray:
    """Numbers ≥ 0 (rows, cols) as fixed-width "d.ddddde±XX," byte strings: (rows, cols, 12) uint8."""
    x = block.astype(np.float64)  # (rows, cols)
    exponent = np.floor(np.log10(np.where(x > 0, x, 1.0))).astype(np.int64)  # (rows, cols)
    mantissa = np.rint(x / 10.0**exponent * 1e5).astype(np.int64)  # (rows, cols) 6 digits: 100000 … 999999
    # log10 can land one off near a power of ten; and rounding 9.999995 gives 10.00000
    low, high = (mantissa < 100_000) & (x > 0), mantissa >= 1_000_000
    exponent -= low
    exponent += high
    mantissa = np.where(low | high, np.rint(x / 10.0**exponent * 1e5), mantissa).astype(np.int64)
    mantissa[x == 0], exponent[x == 0] = 0, 0
    out = np.empty(x.shape + (12,), np.uint8)  # (rows, cols, 12)
    for i, power in enumerate((100_000, 10_000, 1_000, 100, 10, 1)):
        out[..., i + (i > 0)] = ord("0") + mantissa // power % 10  # digits around the point
    out[..., 1] = ord(".")
    out[..., 7] = ord("e")
    out[..., 8] = np.where(exponent < 0, ord("-"), ord("+"))
    out[..., 9] = ord("0") + np.abs(exponent) // 10 % 10
    out[..., 10] = ord("0") + np.abs(exponent) % 10
    out[..., 11] = ord(",")
    return out


def weights_npy(weights: np.ndarray) -> bytes:
    """The matrix as a float32 .npy file (numpy.load reads it; no pickle inside)."""
    out = io.BytesIO()
    np.lib.format.write_array(out, np.ascontiguousarray(weights, dtype=np.float32), allow_pickle=False)
    return out.getvalue()


def figure_html(fig: go.Figure) -> str:
    """A standalone HTML page with plotly.js inlined, so it opens without a network."""
    return fig.to_html(include_plotlyjs=True, full_html=True)
