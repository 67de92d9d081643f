"""Downloads: weight matrices as CSV, figures as standalone HTML that works offline."""

from __future__ import annotations

import csv
import io

import numpy as np
import plotly.graph_objects as go

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: str) -> str:
    # A leading '=', '+', '-' or '@' makes spreadsheets run the cell as a formula.
    return "'" + text if text.startswith(_FORMULA_START) else text


def weights_csv(weights: np.ndarray, row_tokens: list[str], col_tokens: list[str] | None = None) -> str:
    """A (Tq, Tk) matrix as CSV: a header of key tokens, then one row per query token."""
    col_tokens = row_tokens if col_tokens is None else col_tokens
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["query \\ key"] + [_cell(t) for t in col_tokens])
    for token, row in zip(row_tokens, np.asarray(weights).tolist()):
        writer.writerow([_cell(token)] + [f"{w:.6g}" for w in row])
    return out.getvalue()


def figure_html(fig: go.Figure) -> str:
    """A standalone HTML page with plotly.js inlined, so it opens without a network."""
    return fig.to_html(include_plotlyjs=True, full_html=True)
