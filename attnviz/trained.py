"""Kept for code written against earlier docs, which promised these names here: they live in attnviz.models now."""

from attnviz.models.reading import head_steps, head_summaries, rollout

__all__ = ["head_summaries", "rollout", "head_steps"]
