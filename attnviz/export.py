"""Downloads: matrices as CSV or float32 .npy, figures as standalone HTML that works offline."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from dataclasses import dataclass
from typing import Callable

import numpy as np
import plotly.graph_objects as go

@dataclass(frozen=True)
class Matrix:
    """A matrix to download, with its labels: the numbers, or a function that gives them when the download is
    made (so a long input's n×n matrix is not kept for a download nobody makes)."""

    values: np.ndarray | Callable[[], np.ndarray]  # (rows, cols)
    rows: list[str]
    cols: list[str]
    corner: str = "query \\ key"  # the CSV's top-left cell: what its rows and columns are

    def get(self) -> np.ndarray:
        return self.values() if callable(self.values) else self.values

    def csv(self) -> bytes:
        return matrix_csv(self.get(), self.rows, self.cols, corner=self.corner)

    def npy(self) -> bytes:
        return weights_npy(self.get())


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
    """A (Tq, Tk) matrix of weights in [0, 1] as CSV: a header of key tokens, then one row per query token."""
    weights = np.asarray(weights)
    if weights.size and (weights.min() < 0 or not np.isfinite(weights).all()):
        raise ValueError("weights_csv writes weights, which are finite and not negative.")
    return matrix_csv(weights, row_tokens, row_tokens if col_tokens is None else col_tokens, corner="query \\ key")


def matrix_csv(matrix: np.ndarray, row_labels: list[str], col_labels: list[str], *, corner: str = "row \\ column") -> bytes:
    """Any (rows, cols) matrix as CSV: a header of column labels, then one labelled line per row.

    Each number is written with 6 significant digits in scientific notation ("2.44141e-04", "-1.50000e+00"),
    formatted by numpy a block of rows at a time: 4,096 × 4,096 numbers take about 2 s, where Python's
    formatting of one number at a time took 17 s. Non-finite numbers are written nan, inf and -inf.
    """
    matrix = np.asarray(matrix)
    if matrix.ndim != 2 or matrix.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"A {matrix.shape} matrix needs one label per row and per column "
                         f"(given {len(row_labels)} and {len(col_labels)}).")
    lines = [_csv_line([corner] + [_cell(str(t)) for t in col_labels]) + b"\n"]
    for start in range(0, len(matrix), CSV_BLOCK_ROWS):
        block = _scientific(matrix[start:start + CSV_BLOCK_ROWS])  # (rows, cols, width) bytes, 0 = nothing
        block[:, -1, -1] = ord("\n")  # each cell ends in ',' but a row's last, which ends the line
        if block.shape[-1] == _WIDTH:  # no sign, no nan: every byte is text
            rows = [row.tobytes()[:-1] for row in block]
        else:
            flat = block.reshape(-1)
            rows = flat[flat != 0].tobytes().split(b"\n")[:-1]
        for label, row in zip(row_labels[start:start + CSV_BLOCK_ROWS], rows):
            lines.append(_csv_line([_cell(str(label))]) + b"," + row + b"\n")
    return b"".join(lines)


_NOT_FINITE = {"nan": np.isnan, "inf": np.isposinf, "-inf": np.isneginf}
_WIDTH = 12  # bytes of "d.ddddde±XX,"


def _scientific(block: np.ndarray) -> np.ndarray:
    """Numbers (rows, cols) as "d.ddddde±XX," byte strings: (rows, cols, 12) uint8. A block with a negative or
    non-finite number gets a sign byte first, 0 (nothing) where there is no minus: (rows, cols, 13)."""
    x = block.astype(np.float64)  # (rows, cols)
    finite = np.isfinite(x)  # (rows, cols)
    signed = int(bool((x < 0).any() or not finite.all()))
    a = np.abs(np.where(finite, x, 0.0))  # (rows, cols)
    exponent = np.floor(np.log10(np.where(a > 0, a, 1.0))).astype(np.int64)  # (rows, cols)
    mantissa = np.rint(a / 10.0**exponent * 1e5).astype(np.int64)  # (rows, cols) 6 digits: 100000 … 999999
    # log10 can land one off near a power of ten; and rounding 9.999995 gives 10.00000
    low, high = (mantissa < 100_000) & (a > 0), mantissa >= 1_000_000
    exponent -= low
    exponent += high
    mantissa = np.where(low | high, np.rint(a / 10.0**exponent * 1e5), mantissa).astype(np.int64)
    mantissa[a == 0], exponent[a == 0] = 0, 0
    out = np.zeros(x.shape + (_WIDTH + signed,), np.uint8)  # (rows, cols, width)
    if signed:
        out[..., 0] = np.where(x < 0, ord("-"), 0)
    cell = out[..., signed:]  # (rows, cols, 12)
    for i, power in enumerate((100_000, 10_000, 1_000, 100, 10, 1)):
        cell[..., i + (i > 0)] = ord("0") + mantissa // power % 10  # digits around the point
    cell[..., 1] = ord(".")
    cell[..., 7] = ord("e")
    cell[..., 8] = np.where(exponent < 0, ord("-"), ord("+"))
    cell[..., 9] = ord("0") + np.abs(exponent) // 10 % 10
    cell[..., 10] = ord("0") + np.abs(exponent) % 10
    cell[..., 11] = ord(",")
    for text, test in _NOT_FINITE.items():
        where = test(x)  # (rows, cols)
        if where.any():
            word = np.zeros(_WIDTH + 1, np.uint8)
            word[:len(text)] = np.frombuffer(text.encode(), np.uint8)
            word[-1] = ord(",")
            out[where] = word
    return out


def weights_npy(weights: np.ndarray) -> bytes:
    """The matrix as a float32 .npy file (numpy.load reads it; no pickle inside)."""
    out = io.BytesIO()
    np.lib.format.write_array(out, np.ascontiguousarray(weights, dtype=np.float32), allow_pickle=False)
    return out.getvalue()


def figure_html(fig: go.Figure) -> str:
    """A standalone HTML page with plotly.js inlined, so it opens without a network."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


def matrices_zip(matrices: list[tuple[str, Matrix]], kind: str) -> bytes:
    """Several named matrices in one .zip, each as CSV (kind "csv") or float32 .npy (kind "npy"). Files are
    numbered in order, "01_input_x.csv", so they list in the order given."""
    if kind not in ("csv", "npy"):
        raise ValueError(f"Unknown kind '{kind}': csv or npy.")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for i, (name, matrix) in enumerate(matrices):
            stem = f"{i + 1:02d}_" + (re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "matrix")
            archive.writestr(f"{stem}.{kind}", matrix.csv() if kind == "csv" else matrix.npy())
    return out.getvalue()
