"""The installed `attnviz` command serves the app, started from a directory that is not the checkout."""

import subprocess

from driver import exceptions, free_port, healthy, wait_for_heatmap


def test_the_attnviz_command_serves_the_app(installed, page, tmp_path):
    venv, elsewhere = installed
    vectors = tmp_path / "tiny.txt"
    vectors.write_text("".join(f"{w} {i + 1} {(-1) ** i} 0.5\n" for i, w in enumerate("the cat sat on mat".split())))
    port = free_port()
    server = subprocess.Popen([str(venv / "bin" / "attnviz"), "--port", str(port), "--address", "127.0.0.1", "--headless",
                               "--vectors", str(vectors)], cwd=elsewhere, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        assert healthy(url, 60), "the attnviz command did not serve within 60 s"
        page.goto(f"{url}/?text=the+cat+sat+on+the+mat")
        wait_for_heatmap(page, lambda t: len(t["y"]) == 6, timeout=60)
        assert page.get_by_text("tiny.txt").count() > 0  # --vectors reached the app
        assert page.get_by_role("button", name="Deploy").count() == 0  # toolbarMode viewer
        assert exceptions(page) == []
    finally:
        server.terminate()
        server.wait(10)
