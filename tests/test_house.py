"""The house drawn from its imports: every `import` in attnviz/, appkit/, pages/ and app.py, at any depth (an import
inside a function is an arrow too, and so is one under `if TYPE_CHECKING:`: a type names what the code leans on). The
drawing has no circle, no arrow runs up a floor, and the app reaches the models only through their facade
(attnviz.models.Model)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Top to bottom. A module may import from its own floor or any floor below it, never above.
FLOORS = [
    ("the app", ["app", "pages"]),
    ("the app's machinery", ["appkit"]),
    ("the library's front doors", ["attnviz.cli", "attnviz.heads_cli", "attnviz.notebook", "attnviz.output_attentions"]),
    ("what is done with a model", ["attnviz.classroom", "attnviz.needle", "attnviz.effects", "attnviz.heads",
                                   "attnviz.scan_file"]),
    ("the models: loaders and families", ["attnviz.models", "attnviz.models.catalog", "attnviz.models.gguf",
                                          "attnviz.models.hf", "attnviz.models.summaries",
                                          "attnviz.models.walk", "attnviz.models.lens", *[
        f"attnviz.models.{family}" for family in ("bert", "bloom", "deberta", "gemma", "gpt2", "gpt_oss", "llama",
                                                  "modernbert", "neox", "opt", "phi")]]),
    ("a loaded model", ["attnviz.models.loaded"]),
    ("what a model does", ["attnviz.models.generate", "attnviz.models.scan", "attnviz.models.census",
                           "attnviz.models.head_files", "attnviz.models.result"]),
    ("the engine", ["attnviz.models.engine", "attnviz.models.mapping", "attnviz.models.errors", "attnviz.models.fused",
                    "attnviz.models.flash", "attnviz.models.pieces", "attnviz.models.files", "attnviz.models.hub"]),
    ("toy attention", ["attnviz.sentence", "attnviz.encdec", "attnviz.retrieval", "attnviz.pooling",
                       "attnviz.qkspace", "attnviz.embeddings"]),
    ("the ground", ["attnviz", "attnviz.functional", "attnviz.positions", "attnviz.cache", "attnviz.urlstate",
                    "attnviz._deprecated", "attnviz.figures", "attnviz.export", "attnviz.web"]),
]
# What the app may not import: the engine's layout and the families' mappings, which the Model answers for.
BEHIND_THE_FACADE = [name for _, names in FLOORS[4:8] for name in names if name.startswith("attnviz.models.")
                     and name not in ("attnviz.models.catalog", "attnviz.models.loaded", "attnviz.models.result",
                                      "attnviz.models.pieces", "attnviz.models.files", "attnviz.models.errors",
                                      "attnviz.models.generate", "attnviz.models.summaries", "attnviz.models.walk",
                                      "attnviz.models.lens", "attnviz.models.census", "attnviz.models.head_files")]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    paths = [ROOT / "app.py", *(p for folder in ("attnviz", "appkit", "pages") for p in (ROOT / folder).rglob("*.py"))]
    return {module_name(p): p for p in paths}


def ours(name: str) -> str | None:
    """The module of ours that `name` (a module, or a name inside one) is, or None for another package's."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imported(name: str, path: Path, source: str | None = None) -> set[str]:
    """The modules of ours that module `name` (at `path`; its text `source`, else the file's) imports."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {ours(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found |= {ours(f"{base}.{alias.name}") for alias in node.names}  # a submodule, or a name in `base`
    return found - {None, name}


@cache
def arrows() -> dict[str, set[str]]:
    return {name: imported(name, path) for name, path in modules().items()}


def floor(name: str) -> int:
    """The floor of module `name` (0 is the top): that of the longest prefix the floors name."""
    best = max((len(prefix), index) for index, (_, names) in enumerate(FLOORS) for prefix in names
               if name == prefix or name.startswith(prefix + "."))
    return best[1]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while not part or part[-1] != v:
                part.append(stack.pop())
                on.discard(part[-1])
            if len(part) > 1:
                found.append(sorted(part))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_drawing_in_the_docs_names_every_module_on_its_floor():
    """docs/development.md's drawing of the house and FLOORS agree: each module a floor names (the families as "the
    families", a package by its own name) stands in the drawing's left column, and the drawing's floors come in the
    same order."""
    import re

    drawing = (ROOT / "docs" / "development.md").read_text().split("The house, floor by floor", 1)[1].split("```")[1]
    rows = [line[:35] for line in drawing.splitlines() if line.strip()]
    families = {"bert", "bloom", "deberta", "gemma", "gpt2", "gpt_oss", "llama", "modernbert", "neox", "opt", "phi"}

    def row_of(name: str) -> int | None:
        word = name.split(".")[-1]
        word = {"app": "app.py", "pages": "pages/", "appkit": "appkit/"}.get(word, word)
        if word in families:
            word = "the families"
        found = [i for i, row in enumerate(rows) if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", row)]
        return found[0] if found else None

    named = [(index, name, row_of(name)) for index, (_, names) in enumerate(FLOORS) for name in names
             if name not in ("attnviz", "attnviz.models")]
    assert [name for _, name, row in named if row is None] == []
    lowest = {}  # each floor's first row in the drawing: the floors stand top to bottom
    for index, _, row in named:
        lowest[index] = min(lowest.get(index, row), row)
    assert list(lowest.values()) == sorted(lowest.values())


def test_the_walk_sees_the_arrows_it_should():
    """The walker itself: arrows it must find (a relative import, an import inside a function, a name imported from
    a package, an import for types only)."""
    graph = arrows()
    assert "attnviz.models.engine" in graph["attnviz.models.loaded"]  # from attnviz.models import engine
    assert "attnviz.models.engine.attend" in graph["attnviz.models.engine.one_layer"]
    assert "attnviz.effects.interventions" in graph["attnviz.effects.why"]
    assert "attnviz.models.scan" in graph["attnviz.models.loaded"]  # also imported inside a method
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from attnviz.models.loaded import Model\n"
    assert "attnviz.models.loaded" in imported("attnviz.models.generate", modules()["attnviz.models.generate"], typed)
    assert "appkit.vectors" in graph["appkit.warm"] and "appkit.common" in graph["pages.self_attention"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_old_names_are_one_table_with_no_module_of_their_own():
    """The names kept for old code (until 0.4) are attnviz._deprecated's table, which a finder answers: no file stands
    for an old module, and each old module's new homes are modules of ours."""
    from attnviz import _deprecated

    known = modules()
    assert [old for old in _deprecated.MOVED if old in known] == []
    assert [home for homes in _deprecated.MOVED.values() for home in homes if home not in known] == []
    assert {old for old, _ in _deprecated.CALLS} <= set(_deprecated.MOVED)


def test_the_house_has_no_circle():
    assert circles(arrows()) == []


def test_every_module_has_a_floor_and_no_arrow_runs_up_one():
    graph = arrows()
    up = [f"{a} ({FLOORS[floor(a)][0]}) → {b} ({FLOORS[floor(b)][0]})" for a, targets in sorted(graph.items())
          for b in sorted(targets) if floor(b) < floor(a)]
    assert up == []


def test_the_app_reaches_models_only_through_their_facade():
    """appkit/ and pages/ import neither the engine nor a family's mapping, and read no model's .arch or .weights:
    the Model answers (model.window(l), model.sink(l, h), model.score_steps(…), …)."""
    graph = arrows()
    reaching = [f"{a} → {b}" for a, targets in sorted(graph.items()) if floor(a) <= 1 for b in sorted(targets)
                if any(b == name or b.startswith(name + ".") for name in BEHIND_THE_FACADE)]
    assert reaching == []
    reads = []
    for name, path in modules().items():
        if floor(name) > 1:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and (node.attr == "arch" or (
                    node.attr == "weights" and ast.unparse(node.value).split(".")[-1] in ("model", "chosen", "loaded"))):
                reads.append(f"{name}:{node.lineno} {ast.unparse(node)}")
            if (isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" and len(node.args) > 1
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value in ("arch", "weights")):
                reads.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert reads == []


def test_the_library_never_imports_streamlit():
    imports = [f"{name}:{node.lineno}" for name, path in modules().items() if name.split(".")[0] == "attnviz"
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                   (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0] == "streamlit"
                   for alias in node.names)]
    assert imports == []


def test_the_engine_is_split_by_what_it_holds_each_part_short():
    parts = {p.stem: len(p.read_text().splitlines()) for p in (ROOT / "attnviz" / "models" / "engine").glob("*.py")}
    assert set(parts) == {"__init__", "layout", "rules", "attend", "one_layer", "running", "notes"}
    assert max(parts.values()) <= 300, parts


def test_one_loop_runs_a_models_layers():
    """Only engine.run_layers calls a layer: every other way through a model (the forward, a batch, a K/V step, the
    scan, the needle lab, the effects) goes through it and keeps what it needs from each layer."""
    calls = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("layer", "engine.layer", "one_layer.layer"):
                calls.append(name)
    assert set(calls) == {"attnviz.models.engine.running"}, calls


def test_one_body_puts_a_layer_together():
    """Only the engine puts a layer together (its projections, W_o, the norms and the MLP: engine.one_layer, which
    run_layers' last-row step asks for its keys): the scan, the needle lab and every other way through a model hand
    the one layer a strategy for its attention (engine.Whole, scan.Blocked) instead of a body of their own."""
    parts = ("project", "attention_input", "rest_of_layer", "after_attention", "rest_in_rows", "feed_forward", "mlp")
    calls = sorted({name for name, path in modules().items() for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in parts})
    assert calls == ["attnviz.models.engine.one_layer", "attnviz.models.engine.running"]


def test_each_score_rule_has_one_owner():
    """A soft cap, ALiBi, DeBERTa's relative terms, a layer's window and the causal mask are each written in
    engine/rules.py only: their LaTeX, the reading of a layer's window, and which keys a query may read (everything
    else asks rules.keys, or Model.allowed and Run.allowed, which ask it; toy attention has functional.causal_mask)."""
    signatures = {r"\tanh\!": "a soft cap's LaTeX", r"m_h\,(i - j)": "ALiBi's LaTeX", r"P^k_{\delta": "the relative terms' LaTeX",
                  "windows[": "a layer's window, read", "def alibi_slopes(": "ALiBi's slopes",
                  "tril(np.ones": "a causal mask, built", "tril(ones": "a causal mask, built"}
    found = [f"{name}: {what}" for name, path in modules().items() if name != "attnviz.models.engine.rules"
             for signature, what in signatures.items() if signature in path.read_text()
             and not (what == "ALiBi's slopes" and name == "attnviz.models.loaded")]  # the facade's own method
    assert found == []
