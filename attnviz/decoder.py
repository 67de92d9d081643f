"""Kept for code written against earlier docs, which promised these names here: they live in attnviz.models now."""

from attnviz.models.generate import next_distribution, top_pieces

__all__ = ["next_distribution", "top_pieces"]
