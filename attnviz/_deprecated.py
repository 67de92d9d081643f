"""Names that earlier versions' docs promised and that have moved: each still works until attnviz 0.4, and warns with
what replaces it (CHANGELOG.md says when each goes). One table says it all: MOVED, each old module and the modules
its names now live in, and CALLS, the old functions and the calls that replace them. No file stands for an old module:
a finder on sys.meta_path (installed by attnviz/__init__.py) makes each when it is imported."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

REMOVED_IN = "0.4"

MOVED = {  # an old module: where its names live now (the first that has a name gives it)
    "attnviz.attention": ("attnviz.functional",),
    "attnviz.attentions": ("attnviz.output_attentions",),
    "attnviz.selfattention": ("attnviz.sentence",),
    "attnviz.why": ("attnviz.effects.why",),
    "attnviz.long": ("attnviz.needle", "attnviz.models.pieces"),
    "attnviz.trained": ("attnviz.models.summaries", "attnviz.models.walk"),
    "attnviz.decoder": ("attnviz.models.generate",),
    "attnviz.models.reading": ("attnviz.models.summaries", "attnviz.models.walk", "attnviz.models.lens"),
    "attnviz.models.model": ("attnviz.models.loaded",),
    "attnviz.models.run": ("attnviz.models.result",),
}


def _models():
    return importlib.import_module("attnviz.models")


CALLS = {  # an old module's function: (the call that replaces it, in words; what it does)
    ("attnviz.trained", "attention"): ('attnviz.models.load("minilm").run(text)',
                                       lambda text: _models().load("minilm").run(text)),
    ("attnviz.decoder", "load_model"): ('attnviz.models.load("smollm2")', lambda: _models().load("smollm2")),
    ("attnviz.decoder", "run"): ("model.run(text)", lambda model, text: model.run(text)),
    ("attnviz.decoder", "extend"): ("model.extend(result, token)", lambda model, result, token: model.extend(result, token)),
    ("attnviz.decoder", "logit_lens"): ("model.logit_lens(hidden)",
                                        lambda model, hidden, top=1: model.logit_lens(hidden, top)),
}


def warn(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and will be removed in attnviz {REMOVED_IN}; use {new}.", DeprecationWarning,
                  stacklevel=3)


def renamed(old: dict, was: str, now: str, value, where: str):
    """`value`, or the keyword `was` in `old` (a function's **old keywords: a parameter's name until 0.3, which
    warns with its new name `now`); TypeError for any other keyword, as Python gives."""
    unknown = set(old) - {was}
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if was not in old:
        return value
    warn(f"{where}({was}=…)", f"{where}({now}=…)")
    return old[was]


def moved(old: str):
    """The `__getattr__` of old module `old`: each name taken from the first of its new homes that has it, or the old
    function that CALLS names, with a warning that says what replaces it."""
    def __getattr__(name: str):
        if name.startswith("_"):  # no old name; asked by tools that walk sys.modules (torch's import does)
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        if (old, name) in CALLS:
            new, call = CALLS[old, name]

            def deprecated(*args, **kwargs):
                warn(f"{old}.{name}()", new)
                return call(*args, **kwargs)
            deprecated.__name__, deprecated.__doc__ = name, f"Deprecated: {new}."
            return deprecated
        for home in map(importlib.import_module, MOVED[old]):
            if hasattr(home, name):
                warn(f"{old}.{name}", f"{home.__name__}.{name}")
                return getattr(home, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")
    return __getattr__


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes each old module of MOVED when it is imported: an empty module whose names come from moved()."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        homes = ", ".join(MOVED[module.__name__])
        module.__doc__ = f"Moved to {homes}: each name still works until attnviz {REMOVED_IN}, and warns."
        module.__getattr__ = moved(module.__name__)


def install() -> None:
    """Puts the Finder on sys.meta_path, once, after the finders of real files."""
    if not any(isinstance(finder, Finder) for finder in sys.meta_path):
        sys.meta_path.append(Finder())
