"""`netc preview` in a real browser (headless Chromium): the page's DOM, a click, the view
toggle, a screenshot; `--watch` re-renders on edits, shows compile errors, stops on Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess

import pytest
from browser import Chromium
from conftest import EXAMPLES, NETC, run_netc
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
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
    # a small graph opens fitted: all of it on the canvas, centred
    graph, drawing = _rect(d, "#graph"), _drawn(d, "returnn")
    assert graph["x"] <= drawing["x"] and drawing["x"] + drawing["w"] <= graph["x"] + graph["w"]
    assert graph["y"] <= drawing["y"] and drawing["y"] + drawing["h"] <= graph["y"] + graph["h"]
    assert (drawing["cx"], drawing["cy"]) == (pytest.approx(graph["cx"], abs=12), pytest.approx(graph["cy"], abs=12))
    assert _cam(d)["s"] > MIN_FIT and not d.find_element(By.ID, "minimap").is_displayed()

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
    assert (
        _text(d, "detail-torch") == "x_lin = torch.nn.functional.linear(x, self.x_lin.W.t(), self.x_lin.b)  # line 15"
    )
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
    assert d.execute_script("return window.__pwned === undefined && document.scripts.length === 3")
    output = d.find_element(By.CSS_SELECTOR, "#view-returnn g.netc-node.output")
    output.click()
    assert _text(d, "detail-title") == "output (output)"
    assert '[batch, </script><script>window.__pwned = 2</script>, h"\\n\\l]' in _text(d, "detail-badges")
    tanh = d.execute_script("return JSON.parse(netc_data.textContent).nodes.find((n) => n.op === 'tanh').id")
    d.find_element(By.ID, f"r-{tanh}").click()
    assert "# </script><script>window.__pwned = 3</script>" in _text(d, "detail-source")
    assert d.execute_script("return window.__pwned === undefined")
    # the loop collapsed: laid out again in the page, its label (a hostile dim name) as text
    d.execute_script("window.netcPreview.toggleCollapse('c0')")
    _laid_out(d)
    assert "loop over </script><script>window.__pwned = 2</script>" in d.find_element(By.ID, "r-c0").text
    assert d.execute_script("return window.__pwned === undefined") and browser.errors() == []


def _watch(model) -> subprocess.Popen:
    """`netc preview MODEL --watch` on any free port; its first stdout line is the address."""
    cmd = [str(NETC), "preview", str(model), "--watch", "--port", "0"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _port_is_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_watch_rerenders_on_edits_shows_errors_and_stops_on_ctrl_c(tmp_path, browser):
    model = tmp_path / "elman.py"
    original = ELMAN.read_text()
    model.write_text(original)
    proc = _watch(model)
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


# --- a real, large graph: LibriSpeech's attention model (~70 layers and a decoder loop) ---

LIBRISPEECH = EXAMPLES / "librispeech_2018.py"
MIN_FIT = 0.7  # page.js: the least scale a page opens at (px per point: 10-point labels at 7 px)


@pytest.fixture(scope="module")
def librispeech(tmp_path_factory):
    """The page and its data (netc run once for the module)."""
    page = tmp_path_factory.mktemp("librispeech") / "librispeech.html"
    run_netc("preview", LIBRISPEECH, "-o", page, check=True)
    data = json.loads(page.read_text().split('id="netc_data">', 1)[1].split("</script>", 1)[0])
    return page, data


def _open(browser, url: str):
    """The page as a new visitor sees it (the tab's stored views cleared)."""
    d = browser.driver
    d.get("about:blank")
    browser.errors()  # drained: a stopped --watch server's page may have logged its lost connection
    d.get(url)
    d.execute_script("window.sessionStorage.clear()")
    d.refresh()
    return d


def _rect(driver, css: str) -> dict:
    return driver.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return {x: r.x, y: r.y, w: r.width, h: r.height, cx: r.x + r.width / 2, cy: r.y + r.height / 2}",
        css,
    )


def _drawn(driver, view: str) -> dict:
    """The screen box around the shapes of a drawing's nodes and loops (edge labels left out)."""
    return driver.execute_script(
        "const rs = [...document.querySelectorAll(arguments[0])].map((e) => e.getBoundingClientRect());"
        "const x = Math.min(...rs.map((r) => r.left)), y = Math.min(...rs.map((r) => r.top));"
        "const w = Math.max(...rs.map((r) => r.right)) - x, h = Math.max(...rs.map((r) => r.bottom)) - y;"
        "return {x, y, w, h, cx: x + w / 2, cy: y + h / 2}",
        f"#view-{view} :is(g.netc-node, g.netc-cluster) > :is(path, polygon, ellipse)",
    )


def _ids(driver, css: str) -> list[str]:
    """The ids of the data's nodes drawn as the elements `css` selects (`r-v3` -> `v3`)."""
    return driver.execute_script("return [...document.querySelectorAll(arguments[0])].map((g) => g.id.slice(2))", css)


def _shown(driver, ids: list[str]) -> list[bool]:
    """Whether each element is drawn (not hidden by a collapsed box; it may lie outside the canvas)."""
    return driver.execute_script(
        "return arguments[0].map((id) => getComputedStyle(document.getElementById(id)).visibility !== 'hidden')", ids
    )


def _cam(driver) -> dict:
    return driver.execute_script("return window.netcPreview.cam()")


def _selected(driver) -> str:
    return driver.execute_script("return JSON.parse(sessionStorage.getItem(arguments[0])).selected", _key(driver))


def _key(driver) -> str:
    return "netc-preview:" + driver.execute_script("return JSON.parse(netc_data.textContent).source_file")


def test_librispeech_opens_fitted_or_readable_at_its_inputs_with_one_box_per_returnn_layer(librispeech, browser):
    page, data = librispeech
    d = _open(browser, page.as_uri())
    graph = _rect(d, "#graph")
    # the whole graph would be too small to read: the documented fallback, the inputs centred across
    width, height = map(float, re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', page.read_text()).groups())
    assert min((graph["w"] - 32) / width, (graph["h"] - 32) / height) < MIN_FIT / 2
    assert _cam(d)["s"] == pytest.approx(MIN_FIT)
    inputs = [_rect(d, f"#r-{n['id']}") for n in data["nodes"] if n["kind"] == "input"]
    left, right = min(r["x"] for r in inputs), max(r["x"] + r["w"] for r in inputs)
    assert graph["x"] <= left and right <= graph["x"] + graph["w"] and graph["y"] <= min(r["y"] for r in inputs)
    assert (left + right) / 2 == pytest.approx(graph["cx"], abs=2)
    assert max(r["y"] + r["h"] for r in inputs) < graph["y"] + graph["h"] / 3  # at the top
    # labels readable: Graphviz's 10-point text at least 7 px
    assert d.execute_script("return document.querySelector('#r-v3 text').getBoundingClientRect().height") >= 7
    assert d.find_element(By.ID, "minimap").is_displayed()

    # one box per RETURNN layer: ops folded into a layer (dropout, concat, a loss's softmax) are drawn once
    nodes = {n["id"]: n for n in data["nodes"]}
    drawn = _ids(d, "#view-returnn g.netc-node")
    layer_kinds = ("op", "output", "loss")  # a state is `prev:` its layer, drawn apart
    layers = [nodes[i]["returnn"]["name"] for i in drawn if nodes[i]["returnn"] and nodes[i]["kind"] in layer_kinds]
    every = {n["returnn"]["name"] for n in data["nodes"] if n["returnn"] and n["kind"] in layer_kinds}
    assert len(layers) == len(set(layers)) == len(every)
    assert len(drawn) < len(data["nodes"]) == _count(d, "#view-torch g.netc-node")  # torch: every op
    lstm1_fw = next(i for i in drawn if nodes[i]["returnn"] and nodes[i]["returnn"]["name"] == "lstm1_fw")
    assert "+ dropout" in d.find_element(By.ID, f"r-{lstm1_fw}").get_attribute("textContent")
    assert _count(d, "#view-returnn g.netc-module") == 6  # lstm0..lstm4 and encoder: fw and bw
    # a folded op selects its layer's box; its detail says where it went
    dropout = next(i for i, n in nodes.items() if n["op"] == "dropout" and n["returnn"]["name"] == "lstm1_fw")
    d.execute_script("window.netcPreview.goTo(arguments[0])", dropout)
    assert "folded into the RETURNN layer lstm1_fw" in _text(d, "detail-badges")
    assert d.find_element(By.ID, f"r-{lstm1_fw}").get_attribute("class").endswith("selected")

    # on a screen where it is readable whole, it opens fitted: all of it, centred
    d.set_window_size(2400, 3000)
    try:
        _open(browser, page.as_uri())
        graph, drawing = _rect(d, "#graph"), _drawn(d, "returnn")
        assert _cam(d)["s"] > MIN_FIT
        assert graph["x"] <= drawing["x"] and drawing["x"] + drawing["w"] <= graph["x"] + graph["w"]
        assert graph["y"] <= drawing["y"] and drawing["y"] + drawing["h"] <= graph["y"] + graph["h"]
        assert (drawing["cx"], drawing["cy"]) == (
            pytest.approx(graph["cx"], abs=12),
            pytest.approx(graph["cy"], abs=12),
        )
    finally:
        d.set_window_size(1400, 800)
    assert browser.errors() == []


def test_wheel_zooms_at_the_cursor_and_drag_pans(librispeech, browser):
    page, _ = librispeech
    d = _open(browser, page.as_uri())
    before, node = _cam(d), _rect(d, "#r-v3")
    ActionChains(d).scroll_from_origin(ScrollOrigin.from_element(d.find_element(By.ID, "r-v3")), 0, -200).perform()
    WebDriverWait(d, 5).until(lambda d: _cam(d)["s"] > before["s"])
    after = _rect(d, "#r-v3")
    assert _cam(d)["s"] > before["s"] * 1.3 and after["w"] > node["w"] * 1.3
    assert (after["cx"], after["cy"]) == (pytest.approx(node["cx"], abs=2), pytest.approx(node["cy"], abs=2))

    # a drag on the canvas moves the drawing with the pointer, selecting nothing
    graph, scale = d.find_element(By.ID, "graph"), _cam(d)["s"]
    ActionChains(d).move_to_element_with_offset(graph, -200, 100).click_and_hold().move_by_offset(
        120, -80
    ).release().perform()
    moved = _rect(d, "#r-v3")
    assert (moved["cx"] - after["cx"], moved["cy"] - after["cy"]) == (
        pytest.approx(120, abs=2),
        pytest.approx(-80, abs=2),
    )
    assert _cam(d)["s"] == scale and not d.find_element(By.ID, "detail").is_displayed()
    d.find_element(By.CSS_SELECTOR, 'button[data-zoom="fit"]').click()
    assert _cam(d)["s"] == pytest.approx(MIN_FIT)
    assert browser.errors() == []


def _centred(d, css: str) -> bool:
    graph, box = _rect(d, "#graph"), _rect(d, css)
    return abs(graph["cx"] - box["cx"]) < 2 and abs(graph["cy"] - box["cy"]) < 2


def test_search_centres_and_selects_and_enter_cycles(librispeech, browser):
    page, data = librispeech
    nodes = {n["id"]: n for n in data["nodes"]}
    d = _open(browser, page.as_uri())
    box = d.find_element(By.ID, "search-input")
    box.send_keys("lstm2_bw", Keys.ENTER)  # a RETURNN layer
    sel = _selected(d)
    assert nodes[sel]["returnn"]["name"] == "lstm2_bw" and _text(d, "search-count") == "1/1"
    assert _centred(d, f"#r-{sel}") and _cam(d)["s"] >= 1
    assert _text(d, "detail-returnn-name") == "lstm2_bw (rec)"

    box.clear()
    box.send_keys("dropout_2", Keys.ENTER)  # a torch variable, folded into lstm1_bw in RETURNN
    sel = _selected(d)
    assert nodes[sel]["torch"]["name"] == "dropout_2" and _centred(d, f"#r-{data['boxes'][sel]}")
    d.find_element(By.CSS_SELECTOR, 'button[data-view="torch"]').click()
    box.send_keys(Keys.ENTER)  # the same query again: the next match (one), now in the torch drawing
    assert _centred(d, f"#t-{sel}")
    d.find_element(By.CSS_SELECTOR, 'button[data-view="returnn"]').click()

    box.clear()
    box.send_keys("accum_att_weights", Keys.ENTER)  # the user's name: several nodes; Enter cycles
    first = _selected(d)
    count = _text(d, "search-count")
    assert count.startswith("1/") and int(count.split("/")[1]) >= 2
    box.send_keys(Keys.ENTER)
    assert _text(d, "search-count").startswith("2/") and _selected(d) != first
    assert nodes[_selected(d)]["label"] == "accum_att_weights"
    box.send_keys(Keys.SHIFT, Keys.ENTER)  # back
    assert _text(d, "search-count").startswith("1/") and _selected(d) == first
    box.clear()
    box.send_keys("no such layer", Keys.ENTER)
    assert _text(d, "search-count") == "no match"
    assert browser.errors() == []


def _laid_out(d, view: str = "returnn") -> None:
    """Wait until the page has drawn the current collapsed boxes (Graphviz runs in the page)."""
    key = d.execute_script(
        "const s = JSON.parse(sessionStorage.getItem(arguments[0])); return s.collapsed.slice().sort().join(',')",
        _key(d),
    )
    WebDriverWait(d, WAIT).until(
        lambda d: d.find_element(By.ID, "graph").get_attribute("data-layout") == f"{view}:{key}"
    )


def _graph_size(d, view: str = "returnn") -> tuple[float, float]:
    """The drawing's size in graph units (its SVG's viewBox)."""
    return tuple(
        d.execute_script(
            "const b = document.querySelector(arguments[0]).viewBox.baseVal; return [b.width, b.height]",
            f"#view-{view} svg",
        )
    )


def test_collapsing_a_loop_or_a_module_lays_it_out_as_one_node(librispeech, browser):
    page, data = librispeech
    d = _open(browser, page.as_uri())
    loop = {n["id"] for n in data["nodes"] if n["cluster"] == "c0"}
    in_loop = [f"r-{i}" for i in _ids(d, "#view-returnn g.netc-node") if i in loop]
    assert len(in_loop) >= 15
    width, height = _graph_size(d)
    node_h = max(_rect(d, "#r-v3 > path, #r-v3 > polygon")["h"], 1) / float(
        d.find_element(By.ID, "graph").get_attribute("data-scale")
    )
    d.execute_script("window.netcPreview.goTo('c0')")
    loop_h = _rect(d, "#r-c0 > path, #r-c0 > polygon")["h"] / float(
        d.find_element(By.ID, "graph").get_attribute("data-scale")
    )
    label = d.find_element(By.CSS_SELECTOR, "#r-c0 > text")
    ActionChains(d).double_click(label).perform()
    _laid_out(d)
    # the loop is one node, laid out again: the box is a node's size, and the drawing shorter
    assert _count(d, "#view-returnn g.netc-collapsed") == 1 and _count(d, "#r-c0.netc-cluster") == 0
    assert "nodes collapsed" in d.find_element(By.CSS_SELECTOR, "#r-c0").text
    collapsed_h = _rect(d, "#r-c0 > path, #r-c0 > polygon")["h"] / float(
        d.find_element(By.ID, "graph").get_attribute("data-scale")
    )
    assert collapsed_h < 2.5 * node_h < loop_h, (collapsed_h, node_h, loop_h)
    assert _graph_size(d)[1] < height - 4 * node_h, (_graph_size(d), height, node_h)
    assert all(_count(d, f"#{i}") == 0 for i in in_loop)  # not drawn
    assert all(_shown(d, ["r-v3", "r-i0", "r-l0"]))  # outside the loop
    assert _selected(d) == "c0" and d.find_element(By.ID, "collapse").text == "expand"
    d.find_element(By.ID, "collapse").click()
    _laid_out(d)
    assert _count(d, "#view-returnn g.netc-collapsed") == 0 and _graph_size(d) == pytest.approx((width, height))
    assert all(_shown(d, in_loop))

    # a module: lstm1's two layers, in the torch view too
    module = next(m for m in data["modules"] if m["path"] == "lstm1")
    d.execute_script("window.netcPreview.goTo(arguments[0])", module["id"])
    assert _text(d, "detail-title") == "module lstm1 (module)"
    d.find_element(By.ID, "collapse").click()
    _laid_out(d)
    assert _count(d, f"#r-{module['id']}.netc-collapsed") == 1
    assert not any(_count(d, f"#r-{i}") for i in module["nodes"] if i not in data["boxes"])
    d.find_element(By.CSS_SELECTOR, '.toggle button[data-view="torch"]').click()
    _laid_out(d, "torch")
    assert _count(d, f"#t-{module['id']}.netc-collapsed") == 1 and not any(
        _count(d, f"#t-{i}") for i in module["nodes"]
    )
    d.find_element(By.CSS_SELECTOR, '.toggle button[data-view="returnn"]').click()
    # searching a hidden node expands what hides it
    d.find_element(By.ID, "search-input").send_keys("lstm1_fw", Keys.ENTER)
    _laid_out(d)
    assert _shown(d, [f"r-{_selected(d)}"]) == [True] and _centred(d, f"#r-{_selected(d)}")
    assert browser.errors() == []


def test_fragment_at_line_col_and_find_select_and_centre(librispeech, browser):
    page, data = librispeech
    nodes = {n["id"]: n for n in data["nodes"]}
    d = _open(browser, page.as_uri() + "#at=81:14")  # `clip(x, -3.0, 3.0)`, its first column (1-based)
    assert _selected(d) == "v3" and nodes["v3"]["op"] == "clip" and _centred(d, "#r-v3")
    # the innermost node: `dropout(x, self.drop)` inside `self.fw(...)` (line 75), in layer lstm1_fw
    d.get(page.as_uri() + "#at=75:40")  # only the fragment changes: no reload, a hashchange
    sel = _selected(d)
    assert nodes[sel]["op"] == "dropout" and _centred(d, f"#r-{data['boxes'][sel]}")
    d.get(page.as_uri() + "#at=75:30")  # on `self.fw(`: the LSTM around it
    assert nodes[_selected(d)]["op"] == "lstm" and nodes[_selected(d)]["returnn"]["name"] == "lstm1_fw"
    d.get(page.as_uri() + "#find=enc_ctx")
    assert nodes[_selected(d)]["returnn"]["name"] == "enc_ctx" and _centred(d, f"#r-{_selected(d)}")
    assert d.find_element(By.ID, "search-input").get_attribute("value") == "enc_ctx"
    assert browser.errors() == []


def test_watch_reload_keeps_zoom_pan_selection_and_collapsed_loops(tmp_path, browser):
    model = tmp_path / "librispeech.py"
    original = LIBRISPEECH.read_text()
    model.write_text(original)
    proc = _watch(model)
    try:
        url = proc.stdout.readline().split()[3]
        d = browser.driver
        browser.errors()  # drained
        d.get(url + "#find=readout_in")
        wait = WebDriverWait(d, WAIT)
        wait.until(lambda d: d.find_element(By.ID, "live-status").text == "live")
        d.execute_script("window.netcPreview.zoomAt(1.5, 100, 100)")
        d.execute_script("window.netcPreview.goTo('m1')")
        d.find_element(By.ID, "collapse").click()  # collapse a module
        _laid_out(d)
        d.execute_script("window.netcPreview.goTo('v3')")
        d.execute_script("window.netcPreview.zoomAt(0.9, 10, 10)")
        cam = _cam(d)
        d.execute_script("window.__before_reload = true")
        model.write_text(original + "\n# an edit\n")
        wait.until(lambda d: d.execute_script("return window.__before_reload === undefined && !!window.netcPreview"))
        assert _cam(d) == pytest.approx(cam)
        assert _selected(d) == "v3" and d.find_element(By.ID, "r-v3").get_attribute("class").endswith("selected")
        _laid_out(d)
        assert _count(d, "#view-returnn g.netc-collapsed") == 1 and _text(d, "detail-title").startswith("source")
        assert browser.errors() == []
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=WAIT)
    assert proc.returncode == 0


def test_fragment_in_a_decoder_loop_and_finding_the_users_own_name(tmp_path, browser):
    """In a decoder, `#at=` on the loop's head is the loop, on the label the body assigns the
    label's state (moved out of the loop as a shift of the target: its place is that name, not
    the whole loop); `#find=` finds a value by the variable the source assigns it to (`scores`,
    stacked after the loop as `logits`)."""
    page = tmp_path / "aed.html"
    run_netc("preview", EXAMPLES / "conformer_aed.py", "--network", "conformer_aed", "-o", page, check=True)
    data = json.loads(page.read_text().split('id="netc_data">', 1)[1].split("</script>", 1)[0])
    nodes = {n["id"]: n for n in data["nodes"]}
    lines = (EXAMPLES / "conformer_aed.py").read_text().splitlines()
    head = next(i for i, text in enumerate(lines, 1) if "for _ in range(2 * x.max_seq_len)" in text)
    assigned = next(i for i, text in enumerate(lines, 1) if "label = choice(" in text)
    d = _open(browser, page.as_uri() + f"#at={head}:9")  # on `for`
    assert _selected(d) == "c0" and _text(d, "detail-title").startswith("loop over dec_time")
    d.get(page.as_uri() + f"#at={assigned}:10")  # on `label` of `label = choice(...)`
    sel = nodes[_selected(d)]
    assert sel["op"] == "shift_frames" and sel["label"] == "label" and sel["source"]["span"]["line"] == assigned
    d.get(page.as_uri() + "#find=scores")
    sel = nodes[_selected(d)]
    assert sel["op"] == "linear" and sel["label"] == "logits" and sel["names"] == ["scores"]
    assert _text(d, "search-count") == "1/1" and _centred(d, f"#r-{data['boxes'].get(sel['id'], sel['id'])}")
    assert browser.errors() == []
