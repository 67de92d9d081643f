"""Moved: turning transformers' output_attentions into a Run (bertviz's input) is attnviz.output_attentions. This
name still works until 0.4, and warns (CHANGELOG.md)."""

from attnviz._deprecated import moved
from attnviz import output_attentions as _home

__getattr__ = moved("attnviz.attentions", _home)
