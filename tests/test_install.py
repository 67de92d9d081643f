"""`pip install .` gives an importable attnviz and an `attnviz` command, from any directory."""

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a pip install into a fresh virtual environment


def test_import_from_another_directory(installed):
    venv, elsewhere = installed
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import attnviz, attnviz.trained, attnviz.cli; print(attnviz.__file__); print(attnviz.cli.app_script())"],
                         cwd=elsewhere, capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith(str(venv)) and out[0].endswith("attnviz/__init__.py")
    assert out[1].startswith(str(venv)) and out[1].endswith("attnviz_app/app.py")


def test_the_library_works_when_installed(installed):
    venv, elsewhere = installed
    code = ("import torch; from attnviz import attend; x = torch.eye(3); "
            "print(round(float(attend(x, x, x).weights.sum()), 4))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=elsewhere, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3.0"


def test_the_installed_package_builds_the_scans_kernel_from_its_own_source(installed, tmp_path):
    """fused.c ships in the package (package-data), so an installed attnviz builds the scan's CPU kernel."""
    import os

    from attnviz.models import fused

    if fused.compiler() is None:
        pytest.skip("no C compiler here to build the scan's kernel")
    venv, elsewhere = installed
    code = ("from attnviz.models import fused; print(fused.SOURCE); print(fused.library() is not None)")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=elsewhere, capture_output=True, text=True,
                         check=True, env={**os.environ, "ATTNVIZ_CACHE": str(tmp_path)}).stdout.splitlines()
    assert out[0].startswith(str(venv)) and out == [out[0], "True"]
    assert list((tmp_path / "kernels").glob("fused-*.so"))


def test_the_command_has_help(installed):
    venv, elsewhere = installed
    out = subprocess.run([str(venv / "bin" / "attnviz"), "--help"], cwd=elsewhere, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("usage: attnviz")
    for option in ("--port", "--vectors", "--vectors-format", "--headless"):
        assert option in out.stdout


def test_the_command_refuses_a_missing_vectors_file(installed):
    venv, elsewhere = installed
    out = subprocess.run([str(venv / "bin" / "attnviz"), "--vectors", "nowhere.txt"], cwd=elsewhere, capture_output=True, text=True)
    assert out.returncode != 0 and "nowhere.txt: no such file" in out.stderr


def test_the_command_line_passes_the_options_to_streamlit(installed):
    venv, elsewhere = installed
    (elsewhere / "v.txt").write_text("the 1 2\n")
    code = ("from attnviz.cli import command, parser; "
            "print(command(parser().parse_args(['--port', '8502', '--vectors', 'v.txt', '--vectors-format', 'glove'])))")
    line = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=elsewhere, capture_output=True, text=True, check=True).stdout
    assert "'--server.port', '8502'" in line and "'--client.toolbarMode', 'viewer'" in line
    assert "'--runner.postScriptGC', 'false'" in line  # the app collects garbage itself (appkit/warm.py)
    assert f"'--', '--vectors', '{elsewhere / 'v.txt'}', '--vectors-format', 'glove'" in line


def test_the_command_passes_each_model_to_the_app(installed, tmp_path):
    venv, elsewhere = installed
    (elsewhere / "mine").mkdir()
    (elsewhere / "other.gguf").write_bytes(b"GGUF")
    code = ("from attnviz.cli import command, parser; "
            "print(command(parser().parse_args(['--model', 'mine', '--model', 'other.gguf'])))")
    line = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=elsewhere, capture_output=True, text=True, check=True).stdout
    assert f"'--', '--model', '{elsewhere / 'mine'}', '--model', '{elsewhere / 'other.gguf'}'" in line
    out = subprocess.run([str(venv / "bin" / "attnviz"), "--model", "nowhere"], cwd=elsewhere, capture_output=True, text=True)
    assert out.returncode != 0 and "--model nowhere: no such file or folder" in out.stderr
    models = subprocess.run([str(venv / "bin" / "python"), "-c",
                             "import sys; from attnviz.models.catalog import offers; "
                             f"print(list(offers(['app.py', '--model', {str(elsewhere / 'mine')!r}], "
                             f"{{'ATTNVIZ_MODELS': {str(elsewhere / 'other.gguf')!r}}})))"],
                            cwd=elsewhere, capture_output=True, text=True, check=True).stdout
    assert models.strip() == "['minilm', 'smollm2', 'other', 'mine']"


def test_each_model_is_checked_at_start_and_one_that_will_not_load_is_not_offered(tmp_path):
    """`attnviz --model` reads each model's headers before the server starts: it says what a good one holds, and why a
    folder with only a pickled checkpoint (or no config) will not load, and leaves that one out of the picker."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import tiny_models

    from attnviz.cli import checked

    good = tiny_models.build("llama", tmp_path)
    pickled = tmp_path / "old"
    pickled.mkdir()
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04not unpickled")
    (pickled / "config.json").write_text('{"model_type": "bert"}')
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "model.safetensors").write_bytes(b"\x00")
    script = ("import sys; from attnviz.cli import checked; "
              f"print(checked({[str(good), str(pickled), str(bare)]!r}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == repr([str(good)])
    said = out.stderr.splitlines()
    assert said[0] == f"attnviz: --model {good}: a decoder (llama), " + said[0].split("(llama), ")[1]
    assert "computed by attnviz" in said[0]
    assert said[1].startswith(f"attnviz: --model {pickled}: will not load") and "pytorch_model.bin is a pickled" in said[1]
    assert "AutoModelForCausalLM" in said[1]
    assert said[2].startswith(f"attnviz: --model {bare}: will not load") and "config.json" in said[2]
    assert checked([]) == []
