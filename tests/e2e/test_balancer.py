"""Two replicas of the app behind HAProxy, configured by deploy/haproxy.cfg itself: each browser stays on its
replica across reruns, an upload works through the balancer, and when a replica stops, a reload lands on the
survivor and draws the heatmap."""

import csv
import io
import os
import shutil
import subprocess
import urllib.request

import pytest

from driver import ROOT, exceptions, free_port, healthy, settle, start_server, wait_for_heatmap, widget

CONFIG = ROOT / "deploy" / "haproxy.cfg"
COOKIE = "ATTNVIZ_REPLICA"


def haproxy_or_skip() -> str:
    path = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if os.path.exists(p)), None)
    if path:
        return path
    if os.environ.get("ATTNVIZ_REQUIRE_BROWSER") == "1":
        pytest.fail("haproxy is not installed (ATTNVIZ_REQUIRE_BROWSER=1; .ci/run installs Debian's haproxy)")
    pytest.skip("haproxy is not installed")


@pytest.fixture(scope="module")
def balancer():
    """(URL, {server name: (process, URL)}, stats URL): two replicas and HAProxy on free local ports."""
    haproxy = haproxy_or_skip()
    replicas = {name: start_server() for name in ("app1", "app2")}
    port, stats_port = free_port(), free_port()
    env = {**os.environ, "ATTNVIZ_BIND": f"127.0.0.1:{port}", "ATTNVIZ_STATS_BIND": f"127.0.0.1:{stats_port}",
           "ATTNVIZ_APP1": replicas["app1"][1].removeprefix("http://"), "ATTNVIZ_APP2": replicas["app2"][1].removeprefix("http://")}
    proxy = subprocess.Popen([haproxy, "-db", "-f", str(CONFIG)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url, stats = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{stats_port}/stats;csv"
    if not healthy(url, 30):
        proxy.kill()
        pytest.fail("haproxy did not answer: " + proxy.stderr.read().decode(errors="replace")[-2000:])
    yield url, replicas, stats
    proxy.terminate()
    proxy.wait(10)
    for process, _ in replicas.values():
        process.terminate()
        process.wait(10)


def replica_of(context) -> str:
    cookies = {c["name"]: c["value"] for c in context.cookies()}
    return cookies[COOKIE]


def sessions_per_server(stats: str) -> dict[str, int]:
    """HAProxy's total sessions (stot) per replica of the attnviz backend."""
    rows = csv.DictReader(io.StringIO(urllib.request.urlopen(stats, timeout=5).read().decode().lstrip("# ")))
    return {r["svname"]: int(r["stot"]) for r in rows if r["pxname"] == "attnviz" and r["svname"].startswith("app")}


def test_sessions_stick_uploads_work_and_a_stopped_replica_is_survived(browser, balancer, tmp_path):
    url, replicas, stats = balancer
    contexts = [browser.new_context(viewport={"width": 1400, "height": 1000}) for _ in range(2)]
    pages = [c.new_page() for c in contexts]
    for page, text in zip(pages, ("the cat sat on the mat", "a dog ran")):
        page.goto(f"{url}/?text={text.replace(' ', '+')}")
        wait_for_heatmap(page, lambda t, n=len(text.split()): len(t["y"]) == n)
    homes = [replica_of(c) for c in contexts]
    assert sorted(homes) == ["app1", "app2"]  # round robin put the two browsers on different replicas
    assert all(n > 0 for n in sessions_per_server(stats).values())

    # Reruns stay on the replica: the session state (a typed sentence, a picked control) survives them.
    page = pages[0]
    for text in ("birds fly south", "the dog was happy today"):
        box = page.get_by_role("textbox", name="Sentence")
        box.fill(text)
        box.press("Control+Enter")
        settle(page)
        wait_for_heatmap(page, lambda t, n=len(text.split()): len(t["y"]) == n)
        page.get_by_text("Hard attention (one-hot argmax)").click()
        settle(page)
        assert replica_of(contexts[0]) == homes[0]
        assert page.get_by_role("textbox", name="Sentence").input_value() == text
    assert exceptions(page) == []

    # An upload goes over plain HTTP to the replica holding the session.
    words = "the dog was happy today".split()
    vectors = tmp_path / "through_the_balancer.txt"
    vectors.write_text("".join(f"{w} {i + 1} {(-1) ** i} {i / 7}\n" for i, w in enumerate(words)))
    widget(page, "stRadio", "Word vectors").get_by_text("Upload a file", exact=True).click()
    settle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(vectors))
    settle(page)
    wait_for_heatmap(page, lambda t: len(t["y"]) == 5)
    assert page.get_by_text("d_model = 3").count() > 0  # the uploaded vectors (3-d) are the ones in use
    assert exceptions(page) == [] and replica_of(contexts[0]) == homes[0]

    # Stop the first browser's replica: a reload lands on the survivor and draws the heatmap.
    process, _ = replicas[homes[0]]
    process.terminate()
    process.wait(10)
    page.reload()
    wait_for_heatmap(page, lambda t: len(t["y"]) >= 2, timeout=60)
    survivor = "app2" if homes[0] == "app1" else "app1"
    assert replica_of(contexts[0]) == survivor
    assert exceptions(page) == []
    for context in contexts:
        context.close()
