"""The three places the app reaches into Streamlit's or uvicorn's internals, each pinned by what it must do, so a version
bump that changes one fails here rather than in a classroom:

- `PagesManager.uses_pages_directory` (appkit/warm.py's lifespan turns Streamlit's pages/ mode off);
- uvicorn's exit handler (attnviz.classroom.http.server_exiting: a server told to stop ends the class's streams);
- `fragment_ids_this_run` (appkit.common.fragment_alone: a fragment's run alone, told from the page's)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from streamlit.testing.v1 import AppTest

from class_support import free_port

ROOT = Path(__file__).resolve().parents[1]


def test_streamlit_still_reads_uses_pages_directory():
    import inspect

    from streamlit.runtime import pages_manager

    assert hasattr(pages_manager.PagesManager, "uses_pages_directory")
    users = [name for name, member in inspect.getmembers(pages_manager)
             if inspect.isclass(member) and "uses_pages_directory" in inspect.getsource(member)]
    assert "PagesManager" in users  # still the flag the manager consults, not a leftover name


SERVER = textwrap.dedent("""
    import sys, uvicorn
    from attnviz.classroom import http, store
    routes = http.ClassRoutes(None, store.SQLiteStore(sys.argv[2]))
    uvicorn.Server(uvicorn.Config(routes, host="127.0.0.1", port=int(sys.argv[1]), log_level="error")).run()
""")


def test_a_server_told_to_stop_ends_the_class_streams_at_once(tmp_path):
    """uvicorn's SIGTERM handler is its Server's bound method with `should_exit`: the class's broker sees it turn
    true and ends every open stream with a retry line, so the server stops in seconds, not when the streams end."""
    from attnviz.classroom import store as stores

    path = tmp_path / "classes.sqlite"
    code, _ = stores.SQLiteStore(path).create()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(path)], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.time() + 30
        while True:
            try:
                stream = urllib.request.urlopen(f"http://127.0.0.1:{port}/_attnviz/class/{code}/events", timeout=10)
                break
            except OSError:
                assert time.time() < deadline, "the server did not start"
                time.sleep(0.2)
        assert stream.readline().startswith(b"id: ")
        assert json.loads(stream.readline().removeprefix(b"data: "))["code"] == code
        started = time.time()
        server.send_signal(signal.SIGTERM)
        rest = stream.read()
        assert b"retry: 1000" in rest
        server.wait(10)
        assert time.time() - started < 8
    finally:
        server.kill()


FRAGMENT_APP = """
import streamlit as st
from appkit.common import fragment_alone

st.session_state.seen = fragment_alone()
"""


def test_streamlit_still_marks_a_fragments_run_in_fragment_ids_this_run():
    """The context's field exists and Streamlit's script runner fills it from a rerun's fragment ids (a page's run:
    none). A fragment's own run is driven in Chromium (e2e/test_browser.py, the Decoder's Next word)."""
    import dataclasses
    import inspect

    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    assert "fragment_ids_this_run" in {field.name for field in dataclasses.fields(ScriptRunContext)}
    assert "fragment_ids_this_run" in inspect.getsource(script_runner)
    at = AppTest.from_string(FRAGMENT_APP, default_timeout=30)
    at.run()
    assert not at.exception and at.session_state["seen"] is False
