import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pytest_configure(config):
    """Under xdist's two workers on two cores, each worker's torch keeps one thread: two threads a worker put four
    on two cores, and torch's workers, spinning at each parallel step's end for a peer that is not running, made the
    heaviest tests several times slower (SmolLM2's scan at 1,024 pieces: 15 s alone, 90 s in the suite). Servers and
    notebooks the tests start run as configured."""
    import os

    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and int(workers) >= (os.cpu_count() or 1):
        import torch

        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def glove():
    from attnviz.embeddings import load_glove

    return load_glove()


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """(venv folder, an empty folder elsewhere): `pip install .` of a copy of this checkout into a fresh virtual
    environment that reuses the installed dependencies (--system-site-packages, --no-deps), as a user would
    install it, minus the downloads."""
    import shutil
    import subprocess
    import sys
    import sysconfig

    base = tmp_path_factory.mktemp("install")
    source, venv, elsewhere = base / "attnviz", base / "venv", base / "elsewhere"  # a clone named attnviz, as users make
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "screenshots", "__pycache__", ".pytest_cache", "build",
                                                                 "*.egg-info", ".benchmarks", ".venv"))
    elsewhere.mkdir()
    # --without-pip: the venv runs the system's pip and setuptools, found through --system-site-packages
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    # Run from inside a virtual environment (README's quick start), --system-site-packages gives the base
    # interpreter's packages, not that environment's: a .pth file puts the running environment's own site-packages
    # on the new venv's path too, after its own, so the install finds pip, setuptools and the dependencies either way.
    new_site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[kind] for kind in ("purelib", "platlib"))
    Path(new_site, "_running_environment.pth").write_text("\n".join(ours) + "\n")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", str(source)], check=True, cwd=base, capture_output=True)
    shutil.rmtree(source)  # what runs now must come from the install, not the copy
    return venv, elsewhere


@pytest.fixture(scope="session")
def smollm2_reference(tmp_path_factory):
    """(tokenizer, module, folder): transformers' own reading of SmolLM2's GGUF file, the reference our engine's runs
    are checked against, as a float32 LlamaForCausalLM with eager attention. Read from the GGUF file once per test run:
    the first process dequantizes it and saves a plain copy (transformers saves no model it read from GGUF) with its
    tokenizer into a folder every xdist worker shares; the others load that folder, which takes a fraction of the time."""
    import os

    import torch
    from filelock import FileLock
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from attnviz import models

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this run's folder, above each worker's own
    folder = shared / "smollm2_transformers"
    with FileLock(str(folder) + ".lock"):
        if not folder.exists():
            path = models.smollm2_path()
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            read = LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
            config = {k: v for k, v in read.config.to_dict().items() if k != "quantization_config"}
            plain = LlamaForCausalLM(LlamaConfig(**config)).to(torch.float32)
            plain.load_state_dict(read.state_dict())
            part = folder.with_name(folder.name + ".part")
            tokenizer.save_pretrained(str(part))
            plain.save_pretrained(str(part))
            part.rename(folder)  # whole or absent
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    module = LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float32).eval()
    return tokenizer, module, folder


@pytest.fixture
def interpreted(monkeypatch):
    """The scan's GPU kernel (attnviz.models.flash) run by Triton's interpreter on the CPU, so that its arithmetic is
    tested without a GPU. Without Triton these tests skip and say why, except with ATTNVIZ_REQUIRE_TRITON=1 (CI, where
    requirements-dev.txt installs it), when they fail."""
    import os

    from attnviz.models import flash

    if flash.tl is None:
        message = "Triton is not installed (requirements-dev.txt installs it for the GPU kernel's tests)"
        if os.environ.get("ATTNVIZ_REQUIRE_TRITON") == "1":
            pytest.fail(message)
        pytest.skip(message)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv(flash.SETTING, raising=False)
    return flash
