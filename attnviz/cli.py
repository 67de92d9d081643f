"""The `attnviz` command: start the app from any directory (`attnviz --help`)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from attnviz.embeddings import VECTOR_FORMATS


def app_script() -> Path:
    """app.py: from the installed attnviz_app package, else from the checkout this module lives in."""
    spec = importlib.util.find_spec("attnviz_app")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            if (Path(folder) / "app.py").is_file():
                return Path(folder) / "app.py"
    checkout = Path(__file__).resolve().parents[1] / "app.py"
    if checkout.is_file():
        return checkout
    raise SystemExit("attnviz: cannot find app.py; reinstall the package (pip install .).")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="attnviz", description="Start the attnviz app (a Streamlit server) and print its "
                                "address. `attnviz heads MODEL` measures a model's head scores instead (--help there).")
    p.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    p.add_argument("--address", default=None, help="address to listen on (default: Streamlit's, all interfaces)")
    p.add_argument("--vectors", metavar="FILE", help="word vectors to use instead of the built-in GloVe 6B 50-d")
    p.add_argument("--vectors-format", choices=VECTOR_FORMATS, help="format of --vectors (default: from the file)")
    p.add_argument("--model", metavar="PATH", action="append", default=[],
                   help="a model to offer beside the built-in ones: a folder in Hugging Face's layout (config.json, "
                        "safetensors weights, the tokenizer), a .gguf file, or a hub name (org/name, org/name@revision) "
                        "already in the local Hugging Face cache, read with no download; repeat it for several (also "
                        "the ATTNVIZ_MODELS setting)")
    p.add_argument("--hub", action="store_true", help="also offer every model in the local Hugging Face cache "
                                                       "(HF_HUB_CACHE, HF_HOME) that attnviz can read")
    p.add_argument("--scan-memory", metavar="SIZE", type=scan_memory_size,
                   help="what Long text's scan of a whole document may keep, such as 2GiB, or 'all' for the model's "
                        "whole context (default: the context where a scan grows the server by at most 1 GiB and half "
                        "the memory free at the start; SmolLM2's 8,192 pieces; also the ATTNVIZ_SCAN_MEMORY setting)")
    p.add_argument("--teacher-key", metavar="KEY",
                   help="the key that starts a class (at least 12 characters; also the ATTNVIZ_TEACHER_KEY setting, "
                        "which replicas share); default: a random key kept in attnviz's cache folder. The server "
                        "prints a teacher link with it when it starts")
    p.add_argument("--headless", action="store_true", help="kept for old scripts: the server always starts headless "
                                                              "(no prompt, no browser opened); open the address it prints")
    return p


def scan_memory_size(text: str) -> str:
    """--scan-memory's SIZE, checked by the rule the page reads it with (attnviz.cache.memory_bound)."""
    from attnviz.cache import memory_bound

    try:
        return "all" if memory_bound(text) is None else text.strip()
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def command(args: argparse.Namespace) -> list[str]:
    """The `streamlit run` command line for these arguments. Headless always: Streamlit then asks for no e-mail at a
    first start and offers no third-party install in the page. The address to print is named (browser.serverAddress),
    so Streamlit prints it instead of asking an outside host for this machine's external IP."""
    shown = args.address if args.address and args.address not in ("0.0.0.0", "::") else "localhost"
    line = [sys.executable, "-m", "streamlit", "run", str(app_script()), "--server.port", str(args.port),
            "--server.headless", "true", "--browser.serverAddress", shown, "--client.toolbarMode", "viewer",
            "--browser.gatherUsageStats", "false", "--server.maxUploadSize", "50", "--runner.postScriptGC", "false",
            "--server.fileWatcherType", "none"]  # an installed app is not edited: nothing to watch
    if args.address:
        line += ["--server.address", args.address]
    extra = []
    if args.vectors:
        extra += ["--vectors", str(Path(args.vectors).expanduser().resolve())]
    if args.vectors_format:
        extra += ["--vectors-format", args.vectors_format]
    if args.scan_memory:
        extra += ["--scan-memory", args.scan_memory]
    for model in args.model:
        path = Path(model).expanduser()  # main() let through only paths that exist and hub names
        extra += ["--model", str(path.resolve()) if path.exists() else model]
    return line + (["--", *extra] if extra else [])


def checked(paths: list[str]) -> list[str]:
    """The --model paths that will load, each said on stderr with what it holds; the others said with why, and left
    out of the picker (so none fails only when chosen)."""
    if not paths:
        return paths
    from attnviz import models

    kept = []
    for path in paths:
        try:
            print(f"attnviz: --model {path}: {models.check(path)}", file=sys.stderr)
            kept.append(path)
        except models.ModelError as error:
            print(f"attnviz: --model {path}: will not load, so it is not offered: {error}", file=sys.stderr)
    return kept


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["heads"]:  # attnviz heads MODEL: measure every head's scores (attnviz.heads_cli)
        from attnviz import heads_cli

        return heads_cli.main(argv[1:])
    args = parser().parse_args(argv)
    if args.vectors and not Path(args.vectors).expanduser().is_file():
        raise SystemExit(f"attnviz: --vectors {args.vectors}: no such file")
    if args.hub or not all(Path(model).expanduser().exists() for model in args.model):
        from attnviz.models import hub  # imports torch: only where a hub name is given
    for model in args.model:
        if not Path(model).expanduser().exists() and not hub.is_id(model):
            raise SystemExit(f"attnviz: --model {model}: no such file or folder (nor a hub name, org/name)")
    asked = list(args.model)
    if args.hub:
        cached = hub.cached()
        print(f"attnviz: --hub: {len(cached)} model(s) in the Hugging Face cache at {hub.cache_dir()}", file=sys.stderr)
        args.model += [name for name in cached if name not in args.model]
    args.model = checked(args.model)
    refused = [model for model in asked if model not in args.model]
    if refused:  # one rule for every model asked for by name: it loads, or the command stops and says why
        raise SystemExit(f"attnviz: {', '.join(refused)} will not load (why: above); the server was not started. "
                         "Fix the model or leave its --model out. (Models --hub finds that will not load are only "
                         "left out.)")
    if args.teacher_key is not None:
        from attnviz.classroom.teacher import KEY_SETTING, MIN_CHARS

        if len(args.teacher_key.strip()) < MIN_CHARS:
            raise SystemExit(f"attnviz: --teacher-key must be at least {MIN_CHARS} characters: a short key can be guessed.")
        os.environ[KEY_SETTING] = args.teacher_key.strip()
    line = command(args)
    os.execv(line[0], line)  # the server replaces this process, so Ctrl+C and signals reach it directly


if __name__ == "__main__":
    main()
