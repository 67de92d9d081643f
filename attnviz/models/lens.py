"""The logit lens as a table: the piece each layer's hidden state would predict next, at a run's last positions."""

from __future__ import annotations

from attnviz.models.loaded import Model
from attnviz.models.result import Run


def logit_lens_table(model: Model, run: Run, last: int) -> dict[str, list[str]]:
    """The logit lens of `run`'s `last` positions as a table: a "layer" column (the embeddings, then each layer, from
    1) and one column a position ("#i piece"), each cell the piece that layer's hidden state would predict next and
    its probability at T = 1, "piece 0.42" (Model.logit_lens)."""
    n = len(run.pieces)
    start = max(0, n - last)
    ids, probs = model.logit_lens(run.hidden[:, start:])  # (L + 1, shown, 1) each
    pieces = model.reader.labels([int(i) for i in ids[..., 0].ravel()])
    shown = n - start
    labels = run.pieces.labels()
    table = {"layer": ["embeddings", *(str(layer) for layer in range(1, model.layers + 1))]}
    for i in range(shown):
        table[f"#{start + i} {labels[start + i]}"] = [f"{pieces[layer * shown + i]} {probs[layer, i, 0]:.2f}"
                                                     for layer in range(model.layers + 1)]
    return table
