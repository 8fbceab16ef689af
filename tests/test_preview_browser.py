"""`netc preview` in a real browser (headless Chromium): the page's DOM, a click, the view
toggle, a screenshot; `--watch` re-renders on edits, shows compile errors, stops on Ctrl-C."""

from __future__ import annotations

import json
import signal
import socket
import subprocess

import pytest
from browser import Chromium
from conftest import EXAMPLES, NETC
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from test_preview import HOSTILE

ELMAN = EXAMPLES / "elman.py"
WAIT = 30  # seconds: re-rendering runs the compiler and Graphviz, on a busy machine


@pytest.fixture(scope="module")
def browser():
    b = Chromium()
    yield b
    b.quit()


def _count(driver, css: str) -> int:
    return driver.execute_script("return document.querySelectorAll(arguments[0]).length", css)


def _text(driver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def test_page_draws_the_graph_and_a_click_shows_source_and_emitted_code(tmp_path, netc, browser):
    page = tmp_path / "elman.html"
    netc("preview", ELMAN, "-o", page, check=True)
    data = json.loads(netc("preview", ELMAN, "--format", "json", check=True).stdout)
    d = browser.driver
    d.get(page.as_uri())
    assert _count(d, "#view-returnn g.netc-node") == len(data["nodes"]) == 9
    assert _count(d, "#view-returnn g.netc-cluster") == 1
    assert "loop over time (line 14)" in d.find_element(By.CSS_SELECTOR, "#view-returnn g.netc-cluster").text
    assert _count(d, "#view-returnn g.netc-edge.state") == 1 and _count(d, "#view-returnn g.netc-node.hoisted") == 1
    assert not d.find_element(By.ID, "detail").is_displayed()

    tanh = next(n["id"] for n in data["nodes"] if n["op"] == "tanh")
    d.find_element(By.CSS_SELECTOR, f"#view-returnn #r-{tanh}").click()
    assert _text(d, "detail-source") == "h = tanh(Linear(hidden)(x_lin + h_prev))"
    assert _text(d, "detail-where") == f"{ELMAN}:17:13"
    assert (
        "'class': 'activation'" in _text(d, "detail-returnn")
        and _text(d, "detail-returnn-name") == "out/output (activation)"
    )
    assert _text(d, "detail-torch") == "h_3 = torch.tanh(linear)  # line 17"
    assert "in the loop at line 14" in _text(d, "detail-badges")
    assert _count(d, "g.selected") == 2  # the node in both drawings

    # the toggle: the torch drawing, labelled with the module's variables
    assert not d.find_element(By.ID, "view-torch").is_displayed()
    d.find_element(By.CSS_SELECTOR, 'button[data-view="torch"]').click()
    assert (
        d.find_element(By.ID, "view-torch").is_displayed() and not d.find_element(By.ID, "view-returnn").is_displayed()
    )
    assert "h_3" in d.find_element(By.ID, f"t-{tanh}").text
    assert "next h" in d.find_element(By.CSS_SELECTOR, "#view-torch g.netc-edge.state").text
    hoisted = d.find_element(By.CSS_SELECTOR, "#view-torch g.netc-node.hoisted")
    hoisted.click()
    assert "hoisted out of the loop at line 14" in _text(d, "detail-badges")
    assert _text(d, "detail-torch") == "x_lin = torch.nn.functional.linear(x, self.x_lin.W.T, self.x_lin.b)  # line 15"
    d.find_element(By.CSS_SELECTOR, 'button[data-zoom="fit"]').click()
    assert browser.errors() == []

    shot = tmp_path / "preview.png"
    assert d.save_screenshot(str(shot))
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def test_hostile_names_are_shown_as_text_and_never_run(tmp_path, netc, browser):
    model = tmp_path / "hostile.py"
    model.write_text(HOSTILE)
    page = tmp_path / "hostile.html"
    netc("preview", model, "-o", page, check=True)
    d = browser.driver
    d.get(page.as_uri())
    assert browser.errors() == []
    assert d.execute_script("return window.__pwned === undefined && document.scripts.length === 2")
    output = d.find_element(By.CSS_SELECTOR, "#view-returnn g.netc-node.output")
    output.click()
    assert _text(d, "detail-title") == "output (output)"
    assert '[batch, </script><script>window.__pwned = 2</script>, h"\\n\\l]' in _text(d, "detail-badges")
    tanh = d.execute_script("return JSON.parse(netc_data.textContent).nodes.find((n) => n.op === 'tanh').id")
    d.find_element(By.ID, f"r-{tanh}").click()
    assert "# </script><script>window.__pwned = 3</script>" in _text(d, "detail-source")
    assert d.execute_script("return window.__pwned === undefined")


def _port_is_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_watch_rerenders_on_edits_shows_errors_and_stops_on_ctrl_c(tmp_path, browser):
    model = tmp_path / "elman.py"
    original = ELMAN.read_text()
    model.write_text(original)
    proc = subprocess.Popen(
        [str(NETC), "preview", str(model), "--watch", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stdout.readline()
        assert first.startswith("netc preview: serving http://127.0.0.1:"), first + proc.stderr.read()
        url = first.split()[3]
        port = int(url.rsplit(":", 1)[1].strip("/"))
        d = browser.driver
        d.get(url)
        wait = WebDriverWait(d, WAIT)
        wait.until(lambda d: d.find_element(By.ID, "live-status").text == "live")
        assert _count(d, "#view-returnn g.netc-node") == 9

        # an edit that adds an op: the open tab reloads by itself and draws it
        model.write_text(
            original.replace(
                "h = tanh(Linear(hidden)(x_lin + h_prev))", "h = tanh(Linear(hidden)(x_lin + h_prev)) * 0.5"
            )
        )
        wait.until(lambda d: _count(d, "#view-returnn g.netc-node") == 10)
        assert d.execute_script("return JSON.parse(netc_data.textContent).nodes.some((n) => n.op === 'mul')")

        # a compile error becomes the page, with its location; the server keeps going
        model.write_text(original.replace("h = tanh(", "h = tanh(oops + "))
        wait.until(lambda d: _count(d, "#error-text") == 1)
        error = _text(d, "error-text")
        assert error.startswith(f"{model}:17:18: error: unknown name `oops`") and "^~~~" in error
        model.write_text(original)
        wait.until(lambda d: _count(d, "#view-returnn g.netc-node") == 9)

        # a deleted model: the page says so (not the old graph), and the file's return re-renders
        model.unlink()
        wait.until(lambda d: _count(d, "#error-text") == 1)
        assert "the file was deleted" in _text(d, "error-text")
        model.write_text(original)
        wait.until(lambda d: _count(d, "#view-returnn g.netc-node") == 9)
        assert browser.errors() == []
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err
    assert out.splitlines()[-1] == "netc preview: stopped" and "re-rendered" in out
    assert f"netc preview: compile error, shown on the page: {model}:17:18: error: unknown name `oops`" in out
    assert f"netc preview: {model} was deleted" in out
    assert "Traceback" not in err
    assert _port_is_closed(port)
