"""attnviz.web: the browser's modules joined for each host. Each bundle is one ES module that node loads, with its
entry's default export; each file keeps its own scope; every name a file takes from another is imported, and no helper
is defined twice; cycles and outside imports are refused."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from attnviz import web

ROOT = Path(__file__).resolve().parents[1]
BROWSER = ROOT / "attnviz" / "browser"
NODE = shutil.which("node")
ENTRIES = {"streamlit/heatmap.mjs": "function", "streamlit/atlas.mjs": "function", "streamlit/routes.mjs": "function",
           "streamlit/timeline.mjs": "function", "anywidget.mjs": "object"}


def modules() -> list[str]:
    return sorted(p.relative_to(BROWSER).as_posix() for p in BROWSER.rglob("*.mjs"))


def code_of(text: str) -> str:
    """The file without its comments and with its strings emptied, so a word in prose or a label is not a use."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\\n])*"|`(?:\\.|[^`\\])*`|\'(?:\\.|[^\'\\\n])*\'', '""', code)


def node_or_skip():
    if NODE is None:
        if os.environ.get("ATTNVIZ_REQUIRE_BROWSER") == "1":
            pytest.fail("node is not on PATH (ATTNVIZ_REQUIRE_BROWSER=1)")
        pytest.skip("node is not on PATH")


@pytest.mark.parametrize("entry", ENTRIES)
def test_each_bundle_is_one_module_with_its_entrys_default_export(entry, tmp_path):
    node_or_skip()
    path = tmp_path / "bundle.mjs"
    path.write_text(web.bundle(entry), encoding="utf-8")
    out = subprocess.run([NODE, "-e", f"import({str(path)!r}).then((m) => console.log(typeof m.default))"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ENTRIES[entry]
    assert "import {" not in web.bundle(entry)  # every import was resolved into the bundle


def test_a_bundle_holds_only_what_its_entry_imports():
    atlas = web.bundle("streamlit/atlas.mjs")
    assert "// ---- atlas.mjs" in atlas and "// ---- weights.mjs" in atlas
    assert "// ---- heatmap.mjs" not in atlas and "// ---- timeline.mjs" not in atlas
    order = re.findall(r"// ---- (\S+)", web.bundle("streamlit/heatmap.mjs"))
    assert order.index("weights.mjs") < order.index("heatmap_draw.mjs") < order.index("heatmap.mjs") < order.index("figures.mjs")
    assert order[-1] == "streamlit/heatmap.mjs" and len(order) == len(set(order))


def test_every_name_taken_from_another_file_is_imported_and_no_helper_is_defined_twice():
    exported: dict[str, list[str]] = {}
    for name in modules():
        for symbol in web._EXPORT.findall(web.read(name)):
            exported.setdefault(symbol, []).append(name)
    assert {s: f for s, f in exported.items() if len(f) > 1} == {}  # each exported helper lives in one file
    missing = []
    for name in modules():
        text = web.read(name)
        code = code_of(text)
        imported = {local for _, pairs in web._imports(name, text) for _, local in pairs}
        declared = set(re.findall(r"(?:function|class|const|let|var)\s+([A-Za-z_$][\w$]*)", code))
        declared |= set(re.findall(r",\s*([A-Za-z_$][\w$]*)\s*=(?!=)", code))  # const a = 1, b = 2
        declared |= set(re.findall(r"(?<=[({,])\s*([A-Za-z_$][\w$]*)\s*(?=[,})])", code))  # parameters and destructuring
        for symbol, where in exported.items():
            uses = re.search(rf"(?<![.\w$]){re.escape(symbol)}\b(?!\s*:)", code)
            if name not in where and uses and symbol not in imported and symbol not in declared:
                missing.append(f"{name} uses {symbol} ({where[0]}) without importing it")
    assert missing == []
    defined: dict[str, list[str]] = {}  # top-level functions: one home each
    for name in modules():
        for symbol in re.findall(r"^(?:export\s+)?function\s+([A-Za-z_$][\w$]*)", web.read(name), re.M):
            defined.setdefault(symbol, []).append(name)
    assert {s: f for s, f in defined.items() if len(f) > 1} == {}


def test_an_import_cycle_or_an_outside_import_is_refused(monkeypatch):
    files = {"a.mjs": 'import { b } from "./b.mjs";\nexport const a = 1;\n',
             "b.mjs": 'import { a } from "./a.mjs";\nexport const b = 2;\n',
             "c.mjs": 'import { x } from "https://example.com/x.mjs";\nexport default x;\n'}
    monkeypatch.setattr(web, "read", lambda path: files[path])
    with pytest.raises(ValueError, match="import cycle: a.mjs → b.mjs → a.mjs"):
        web._order("a.mjs")
    with pytest.raises(ValueError, match="only relative imports"):
        web._order("c.mjs")


def test_two_files_may_use_the_same_name_each_in_its_own_scope(monkeypatch, tmp_path):
    node_or_skip()
    files = {"one.mjs": "const label = 'one';\nexport function first() { return label; }\n",
             "two.mjs": "const label = 'two';\nexport function second() { return label; }\n",
             "entry.mjs": 'import { first } from "./one.mjs";\nimport { second as other } from "./two.mjs";\n'
                          "export default () => first() + other();\n"}
    monkeypatch.setattr(web, "read", lambda path: files[path])
    path = tmp_path / "bundle.mjs"
    path.write_text(web.bundle.__wrapped__("entry.mjs"), encoding="utf-8")
    out = subprocess.run([NODE, "-e", f"import({str(path)!r}).then((m) => console.log(m.default()))"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "onetwo", out.stderr
