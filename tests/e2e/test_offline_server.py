"""The `attnviz` command as a user starts it, with no terminal: headless at once (no e-mail prompt, no third-party
pop-up), the address printed, and, recorded under strace across a session that visits every page, no connection from
the server process or its children to anything but this machine."""

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from driver import ROOT, exceptions, free_port, healthy, settle

PAGES = ["", "lesson", "kv_database", "pooling", "scoring", "encoder_decoder", "batches", "heads", "trained", "decoder",
         "long_text"]
LOOPBACK = re.compile(r'inet_addr\("127\.|inet_pton\(AF_INET6, "::1"|inet_pton\(AF_INET6, "::ffff:127\.')


def outside_connections(log: str) -> list[str]:
    """The connect() calls of an strace -e trace=connect log that reach an IPv4 or IPv6 address off this machine."""
    calls = [line for line in log.splitlines() if "connect(" in line and ("AF_INET" in line)]
    return [line for line in calls if not LOOPBACK.search(line)]


def stop_traced(tracer: subprocess.Popen) -> None:
    """Stop the server strace started (strace itself, signalled, would only let go of it), then strace, which ends
    with it."""
    children = open(f"/proc/{tracer.pid}/task/{tracer.pid}/children").read().split()
    for pid in children:
        os.kill(int(pid), signal.SIGTERM)
    try:
        tracer.wait(30)
    except subprocess.TimeoutExpired:
        for pid in children:
            os.kill(int(pid), signal.SIGKILL)
        tracer.wait(30)


def test_the_loopback_rule_reads_stracess_lines():
    log = "\n".join([
        '12 connect(5, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("52.1.2.3")}, 16) = -1 ENETUNREACH',
        '12 connect(6, {sa_family=AF_INET, sin_port=htons(8501), sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
        '12 connect(7, {sa_family=AF_INET6, sin6_port=htons(80), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr)}, 28) = 0',
        '12 connect(8, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT',
    ])
    assert outside_connections(log) == [log.splitlines()[0]]


def test_the_command_starts_headless_prints_its_address_and_connects_nowhere_else(browser, tmp_path):
    strace = shutil.which("strace")
    if strace is None:
        if os.environ.get("ATTNVIZ_REQUIRE_BROWSER") == "1":
            pytest.fail("strace is not installed (ATTNVIZ_REQUIRE_BROWSER=1; .ci/run installs it)")
        pytest.skip("strace is not installed")
    port = free_port()
    trace, out = tmp_path / "connect.log", tmp_path / "server.log"
    with open(out, "w") as printed:
        server = subprocess.Popen([strace, "-f", "-e", "trace=connect", "-o", str(trace), sys.executable, "-m",
                                   "attnviz.cli", "--port", str(port)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                                  stdout=printed, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    try:
        url = f"http://127.0.0.1:{port}"
        assert healthy(url, 120), out.read_text()
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for path in PAGES:
            page.goto(f"{url}/{path}")
            page.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
            settle(page, timeout=180_000)
            assert exceptions(page) == [], path
            assert page.get_by_test_id("stSkillsNudge").count() == 0
        page.close()
    finally:
        stop_traced(server)
    printed = out.read_text()
    assert f"URL: http://localhost:{port}" in printed and "Email" not in printed and "External URL" not in printed
    assert "Did not auto detect external IP" not in printed and "skills" not in printed.lower()
    assert outside_connections(trace.read_text()) == []
