"""The browser's code, as the hosts load it. The figures are ES modules in attnviz/browser/ that import each other
(`import { a, b as c } from "./x.mjs";`), so node's tests import them as they are. A host takes one module: the
Streamlit components (appkit/interactive.py) their entry in browser/streamlit/, the notebook widgets (attnviz.notebook)
browser/anywidget.mjs. `bundle` joins an entry and everything it imports into one module's text, with no build step
and no request to any other host: each file in a scope of its own, so two files may use the same name, and every
helper exists once. No streamlit here."""

from __future__ import annotations

import posixpath
import re
from functools import cache
from importlib import resources

CSS = "attnviz.css"
_NAME = r"[A-Za-z_$][\w$]*"
_IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"([^"]+)";[ \t]*\n?', re.M)
_EXPORT = re.compile(rf"^export\s+(?=(?:async\s+function|function|class|const|let)\s+({_NAME}))", re.M)
_EXPORT_DEFAULT = re.compile(r"^export\s+default\s+(.+?);[ \t]*$", re.M)
_EXPORT_DEFAULT_DECLARATION = re.compile(rf"^export\s+default\s+(?=(?:async\s+function|function|class)\s+({_NAME}))", re.M)


def read(path: str) -> str:
    """A file of attnviz/browser/, by its path there ("atlas.mjs", "streamlit/atlas.mjs")."""
    return resources.files("attnviz").joinpath("browser", *path.split("/")).read_text(encoding="utf-8")


def css() -> str:
    return read(CSS)


def _imports(path: str, text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each import of `text` (the file at `path`): the imported file's path and its (name, local name) pairs."""
    found = []
    for names, target in _IMPORT.findall(text):
        if not target.startswith("./") and not target.startswith("../"):
            raise ValueError(f"{path}: only relative imports of attnviz's own files are joined, not {target!r}")
        pairs = []
        for item in filter(None, (part.strip() for part in names.split(","))):
            name, _, local = item.partition(" as ")
            pairs.append((name.strip(), (local or name).strip()))
        found.append((posixpath.normpath(posixpath.join(posixpath.dirname(path), target)), pairs))
    return found


def _order(entry: str) -> list[str]:
    """The files `entry` needs, each after the files it imports; an import cycle is an error."""
    done: list[str] = []

    def visit(path: str, stack: tuple[str, ...]) -> None:
        if path in done:
            return
        if path in stack:
            raise ValueError("import cycle: " + " → ".join((*stack, path)))
        for target, _ in _imports(path, read(path)):
            visit(target, (*stack, path))
        done.append(path)

    visit(entry, ())
    return done


def _variable(path: str) -> str:
    return "module_" + re.sub(r"\W", "_", path.removesuffix(".mjs"))


def _scoped(path: str) -> str:
    """The file at `path` as a constant holding its exports: its imports read from the files joined before it."""
    text = read(path)
    reads = [f"const {{ {', '.join(name if name == local else f'{name}: {local}' for name, local in pairs)} }} = "
             f"{_variable(target)};" for target, pairs in _imports(path, text)]
    body = _IMPORT.sub("", text)
    exported = _EXPORT.findall(body)
    body = _EXPORT.sub("", body)
    declared = _EXPORT_DEFAULT_DECLARATION.search(body)
    if declared:
        body = _EXPORT_DEFAULT_DECLARATION.sub("", body)
        exported.append(f"default: {declared.group(1)}")
    default = _EXPORT_DEFAULT.search(body)
    if default:
        body = _EXPORT_DEFAULT.sub(lambda m: f"const default_export = {m.group(1)};", body)
        exported.append("default: default_export")
    return (f"// ---- {path}\nconst {_variable(path)} = (() => {{\n" + "\n".join(reads) + "\n" + body
            + f"\nreturn {{ {', '.join(exported)} }};\n}})();\n")


@cache
def bundle(entry: str, name: str | None = None) -> str:
    """`entry` (a path in attnviz/browser/) and every file it imports, joined into one ES module whose default export
    is the entry's; with `name`, a script that puts the entry's default export in a constant of that name instead
    (a page's own <script type="module"> that uses it)."""
    joined = "\n".join(_scoped(path) for path in _order(entry))
    last = f"const {name} = " if name else "export default "
    return ("// attnviz's browser code, joined by attnviz.web.bundle: each file in its own scope.\n" + joined
            + f"\n{last}{_variable(entry)}.default;\n")
