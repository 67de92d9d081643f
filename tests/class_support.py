"""A real redis-server for the class tests, on a free local port (CI installs Debian's; ATTNVIZ_REQUIRE_REDIS=1 makes a
missing one fail rather than skip)."""

import os
import shutil
import socket
import subprocess
import time

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server(folder):
    """(process, URL) of a fresh redis-server that keeps nothing on disk."""
    path = shutil.which("redis-server") or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)
    if path is None:
        if os.environ.get("ATTNVIZ_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is not installed (ATTNVIZ_REQUIRE_REDIS=1; .ci/run installs Debian's redis-server)")
        pytest.skip("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen([path, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    process.kill()
    pytest.fail("redis-server did not start")
