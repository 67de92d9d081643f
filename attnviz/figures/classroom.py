"""A class's quiz results as figures: the pre and post score distributions, and each item's share correct before and
after (attnviz.classroom.quiz.results)."""

from __future__ import annotations

import html

import plotly.graph_objects as go

PRE, POST = "#8a8f98", "#1f6feb"


def quiz_figures(found, quiz) -> tuple[go.Figure, go.Figure]:
    """(score distributions, items' shares): a score is a student's share of items right, in %; an item nobody
    answered in a phase has no bar there."""
    counts = len(quiz.items)
    edges = [100 * k / counts for k in range(counts + 1)]
    scores = go.Figure()
    for name, values, colour in (("pre", found.pre, PRE), ("post", found.post, POST)):
        tallied = [sum(round(100 * v) == round(e) for v in values.values()) for e in edges]
        scores.add_bar(x=edges, y=tallied, name=f"{name} ({len(values)})", marker_color=colour)
    scores.update_layout(title="Scores before and after: students per score", barmode="group",
                         xaxis=dict(title=f"share of the {counts} items right", ticksuffix="%", range=[-5, 105]),
                         yaxis_title="students", height=320, margin=dict(t=60))
    items = go.Figure()
    labels = [html.escape(item.topic) for item in quiz.items]
    for index, (name, colour) in enumerate((("before", PRE), ("after", POST))):
        shares = [found.items[item.id][index] for item in quiz.items]
        items.add_bar(y=labels, x=[None if s is None else 100 * s for s in shares], orientation="h", name=name,
                      marker_color=colour)
    items.update_layout(title="Each item: share correct before and after", barmode="group", xaxis_title="% correct",
                        xaxis_range=[0, 100], yaxis_autorange="reversed", height=120 + 36 * counts, margin=dict(t=60))
    return scores, items
