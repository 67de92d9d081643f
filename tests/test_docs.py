"""README and docs/: every relative link and #anchor resolves, README's two commands are the ones CI and a newcomer run,
README stays short, and every Python block of README and docs/ runs as it is pasted."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, '-', '_' and spaces kept),
    spaces as '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))  # a '#' in a code block is no heading
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def links(path: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_every_relative_link_and_anchor_resolves(path):
    broken = []
    for target in links(path):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        where = (path.parent / file).resolve() if file else path
        if not where.exists():
            broken.append(f"{target}: no {where.relative_to(ROOT) if where.is_relative_to(ROOT) else where}")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target}: no heading #{anchor} in {where.name}")
    assert not broken, broken


def test_the_slug_is_githubs():
    assert slug("torch: CPU or CUDA") == "torch-cpu-or-cuda"
    assert slug("The query–key space of a head") == "the-querykey-space-of-a-head"
    assert slug("What blocks rows 1, 2 and 6 (2026-11-23, UTC)") == "what-blocks-rows-1-2-and-6-2026-11-23-utc"


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [block.strip() for lang, block in FENCE.findall(text) if not lang and block.count("\n") == 1]


def test_readmes_two_commands_are_the_ones_ci_and_a_newcomer_run():
    run_app, run_tests = readme_commands()[:2]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("apt-get")]
    assert ci == [run_tests]
    # The app's command installs what the tests' installs, minus the test tools, and starts the app.
    assert run_app.startswith("python3 -m venv .venv && . .venv/bin/activate && ") and run_app.endswith("streamlit run app.py")
    assert "pip install -r requirements.txt" in run_app and "pip install -r requirements-dev.txt" in run_tests
    # The common case, Linux without an NVIDIA GPU: torch's CPU build first, not PyPI's CUDA build of several GB.
    assert "pip install --no-deps -r requirements-torch-cpu.txt && pip install -r requirements.txt" in run_app
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()
    deps = [part for part in run_tests.split(" && ") if part.startswith("pip install --no-deps")]
    assert deps and all(part in run_app for part in deps)


def test_torchs_cpu_build_is_its_own_step_from_its_own_index_alone():
    """requirements-torch-cpu.txt names only torch's CPU build of requirements.txt's version, with --index-url (not
    --extra-index-url, which made pip ask an unreachable index again for every package), and README says to run it
    before requirements.txt, in the app's quick start and in "Install the package"."""
    pins = (ROOT / "requirements.txt").read_text().splitlines()
    torch = next(line for line in pins if line.startswith("torch=="))
    lines = [line for line in (ROOT / "requirements-torch-cpu.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    assert lines == ["--index-url https://download.pytorch.org/whl/cpu", f"{torch}+cpu"]
    assert not any("extra-index-url" in (ROOT / name).read_text() for name in ("requirements.txt", "requirements-dev.txt"))
    readme = (ROOT / "README.md").read_text()
    # --no-deps: where PyTorch's index serves torch alone, its dependencies (filelock, …) must come from PyPI, in the
    # next step; every command that installs the file says so (a step without it failed on "filelock").
    assert "pip install --no-deps -r requirements-torch-cpu.txt" in readme.split("```")[0]  # said before the app's command
    for path in (ROOT / "README.md", ROOT / "docs" / "gpu.md", ROOT / "requirements-torch-cpu.txt"):
        for command in re.findall(r"pip install[^`\n]*requirements-torch-cpu\.txt", path.read_text()):
            assert "--no-deps" in command, (path.name, command)
    install = readme[readme.index("## Install the package"):]
    assert install.index("requirements-torch-cpu.txt") < install.index('pip install -c requirements.txt')


def test_readme_says_where_the_library_imports_from_a_clone_as_it_does(tmp_path):
    """From the folder above a clone named attnviz, `import attnviz` takes the clone's folder for the package and fails
    with the message README quotes; from the clone's own folder it imports."""
    (tmp_path / "attnviz").symlink_to(ROOT)  # the clone, as `git clone … attnviz` names it, seen from its parent
    probe = [sys.executable, "-c", "from attnviz import models"]
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    above = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True, env=clean, timeout=120)
    installed = subprocess.run([sys.executable, "-c", "import attnviz, sys; print(attnviz.__file__)"], cwd=tmp_path / "..",
                               capture_output=True, text=True, env=clean, timeout=120)
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "cannot import name 'models' from 'attnviz' (unknown location)" in readme
    if installed.returncode == 0 and str(ROOT) not in installed.stdout:
        pytest.skip("attnviz is installed in this Python: the installed package is found first from anywhere")
    assert above.returncode != 0 and "cannot import name 'models' from 'attnviz' (unknown location)" in above.stderr
    inside = subprocess.run(probe, cwd=ROOT, capture_output=True, text=True, env=clean, timeout=120)
    assert inside.returncode == 0, inside.stderr


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


PYTHON_BLOCKS = [(path, block) for path in DOCS for lang, block in FENCE.findall(path.read_text(encoding="utf-8"))
                 if lang == "python"]


def test_every_python_block_of_the_docs_is_run_and_only_python_is_fenced_as_python():
    """Every doc's Python blocks are among those run below (README and every page of docs/), and each parses: a
    table or prose fenced as Python (bertviz's side-by-side once was) fails here."""
    import ast

    assert {path.name for path, _ in PYTHON_BLOCKS} >= {"README.md", "library.md", "models.md", "notebook.md"}
    for path, block in PYTHON_BLOCKS:
        ast.parse(block, filename=path.name)


@pytest.mark.parametrize("path, block", PYTHON_BLOCKS, ids=[f"{p.name}-{i}" for i, (p, _) in enumerate(PYTHON_BLOCKS)])
@pytest.mark.slow
def test_python_blocks_run_as_pasted(path, block, tmp_path):
    """Each block alone, in a fresh interpreter, from another directory, as a reader pastes it into Python's prompt:
    line by line (a compound statement needs the blank line after it), each expression's value printed. What it
    prints stays short (a block once ended on a call that printed 195 KB of tensors)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", PROMPT], input=block, cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(done.stdout) < PRINTED_LIMIT, done.stdout[:500]


PRINTED_LIMIT = 5_000  # characters a pasted block may print
PROMPT = """
import code, sys
failed = []
class Prompt(code.InteractiveConsole):
    def showsyntaxerror(self, filename=None, **kwargs):
        failed.append(1)
        super().showsyntaxerror(filename, **kwargs)
    def showtraceback(self):
        failed.append(1)
        super().showtraceback()
prompt = Prompt()
for line in sys.stdin.read().splitlines() + [""]:
    prompt.push(line)
sys.exit(1 if failed else 0)
"""


def test_the_prompt_finds_what_a_pasted_block_gets_wrong(tmp_path):
    """The prompt above fails a block a reader could not paste: no blank line after a with block."""
    pasted = "import contextlib\nwith contextlib.nullcontext():\n    x = 1\ny = x + 1\n"
    done = subprocess.run([sys.executable, "-c", PROMPT], input=pasted, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "SyntaxError" in done.stderr
    fixed = pasted.replace("    x = 1\n", "    x = 1\n\n")
    assert subprocess.run([sys.executable, "-c", PROMPT], input=fixed, capture_output=True, text=True, timeout=60).returncode == 0


def test_the_version_is_one_number_and_the_changelog_names_it():
    import re as _re

    import attnviz

    declared = _re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), _re.M).group(1)
    assert attnviz.__version__ == declared
    first = _re.search(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), _re.M).group(1)
    assert first == declared
