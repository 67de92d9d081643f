"""What a figure shows, in words, made from its numbers: the accessible description of every chart the app and the
notebook draw with plotly (the browser's own figures say theirs in browser/draw.mjs's cellWords and figures' labels).

A matrix is described by its size, its largest value and where it is, and each row's strongest column (for attention:
each query's strongest key and its weight); bars by their largest values in order and their trend. Masked or missing
cells (NaN) are left out and counted. Numbers use 3 significant digits, as the hover does.
"""

from __future__ import annotations

import numpy as np

ROWS_NAMED = 12  # a description names each row's strongest column up to this many rows, then says how many more


def number(x: float) -> str:
    """3 significant digits, − for minus: what a screen reader reads of a cell."""
    return ("−" if x < 0 else "") + f"{abs(x):.3g}"


def matrix(values: np.ndarray, rows: list[str], cols: list[str], *, what: str = "Attention weights",
           row_axis: str = "query", col_axis: str = "key") -> str:
    """`values` (rows, cols) in sentences: '{what}: 6 queries × 6 keys. The largest, 0.871, is query cat, key sat.
    Each query's strongest key: the → the 0.412; cat → sat 0.871; …'."""
    values = np.asarray(values, dtype=np.float64)  # (n, m)
    n, m = values.shape
    finite = np.isfinite(values)
    said = [f"{what}: {_count(n, row_axis)} × {_count(m, col_axis)}."]
    if not finite.any():
        return said[0] + " No cell has a value."
    shown = np.where(finite, values, -np.inf)  # (n, m) missing cells never the largest
    i, j = np.unravel_index(int(np.argmax(shown)), shown.shape)
    said.append(f"The largest, {number(values[i, j])}, is {row_axis} {rows[i]}, {col_axis} {cols[j]}.")
    if n > 1 or m > 1:
        strongest = [f"{rows[r]} → {cols[c]} {number(values[r, c])}"
                     for r, c in enumerate(np.argmax(shown, axis=1)[:ROWS_NAMED]) if finite[r].any()]
        more = f"; and {n - ROWS_NAMED} more {_plural(row_axis)}" if n > ROWS_NAMED else ""
        said.append(f"Each {row_axis}'s strongest {col_axis}: " + "; ".join(strongest) + more + ".")
    missing = int((~finite).sum())
    if missing:
        said.append(f"{missing} of {n * m} cells are masked or empty.")
    return " ".join(said)


def bars(values: np.ndarray, labels: list[str], *, what: str = "Bars") -> str:
    """`values` (k,) drawn as bars named `labels`, in sentences: the largest three in order, and the trend from the
    first bar to the last."""
    values = np.asarray(values, dtype=np.float64).ravel()  # (k,)
    finite = np.isfinite(values)
    said = [f"{what}: {_count(len(values), 'bar')}."]
    if not finite.any():
        return said[0] + " No bar has a value."
    order = [k for k in np.argsort(-np.where(finite, values, -np.inf), kind="stable") if finite[k]]
    said.append("Largest: " + ", then ".join(f"{labels[k]} {number(values[k])}" for k in order[:3]) + ".")
    kept = values[finite]
    if len(kept) >= 3:
        steps = np.sign(np.diff(kept))  # (k − 1,)
        trend = ("they rise from first to last" if (steps >= 0).all() else
                 "they fall from first to last" if (steps <= 0).all() else "they go up and down")
        said.append(f"In the order drawn, {trend}.")
    return " ".join(said)


def figure(fig, values: np.ndarray | None = None, rows: list[str] | None = None, cols: list[str] | None = None) -> str:
    """A plotly figure's accessible text: its title, then its numbers described (`values` with its `rows` and
    `cols` where the caller has them, as a download's Matrix; else the first trace's own data)."""
    title = _title(fig)
    if values is not None and np.ndim(values) == 2 and rows is not None and cols is not None:
        if np.shape(values)[0] == 1:
            return bars(np.asarray(values)[0], list(cols), what=title)
        return matrix(values, list(rows), list(cols), what=title, row_axis="row", col_axis="column")
    for trace in fig.data:
        if trace.type == "bar" and trace.x is not None and trace.y is not None:
            horizontal = trace.orientation == "h"
            numbers, names = (trace.x, trace.y) if horizontal else (trace.y, trace.x)
            return bars(np.asarray(numbers, dtype=np.float64), [str(v) for v in names], what=title)
        if trace.type == "heatmap" and trace.z is not None:
            z = np.asarray(trace.z, dtype=np.float64)
            names = [[str(v) for v in (axis if axis is not None else range(size))]
                     for axis, size in ((trace.y, z.shape[0]), (trace.x, z.shape[1]))]
            return matrix(z, *names, what=title, row_axis="row", col_axis="column")
    return title


def _title(fig) -> str:
    text = fig.layout.title.text if fig.layout.title and fig.layout.title.text else "Chart"
    return str(text).replace("<br>", " ")


def _plural(word: str) -> str:
    return word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else word + "s"


def _count(k: int, word: str) -> str:
    return f"{k:,} {word if k == 1 else _plural(word)}"
