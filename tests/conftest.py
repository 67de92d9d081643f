import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


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
