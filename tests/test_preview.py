"""`netc preview` without a browser: the graph as data (JSON and its documented schema), as dot,
the page's self-containedness, determinism and escaping. The browser tests are in
test_preview_browser.py."""

from __future__ import annotations

import ast
import os
import re
import subprocess

import pytest
from conftest import EXAMPLES, ROOT, example_network

from netc.parser.source import read_source
from netc.preview import load_preview
from netc.preview.dot import to_dot
from netc.preview.model import Preview, json_schema

ELMAN = EXAMPLES / "elman.py"

# dim names (any string) and a comment, trying to end the script element or the dot string
HOSTILE = '''\
"""Names that try to break the page: </script><script>window.__pwned = 1</script>"""

from netc import Dim, Tensor, batch, Linear, mark_as_loss, network, reduce_sum, tanh, zeros

time = Dim("</script><script>window.__pwned = 2</script>")
feat = Dim("<b>feat</b>&amp;", 3)
hidden = Dim('h"\\\\n\\\\l', 4)


@network
def hostile(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + h)  # </script><script>window.__pwned = 3</script>
        out.append(h)
    mark_as_loss(reduce_sum(h, axis=hidden), "ce")  # output and loss names must be RETURNN layer names
    return {"output": out}
'''


def preview_json(netc, model) -> Preview:
    return Preview.model_validate_json(netc("preview", model, "--format", "json", check=True).stdout)


def test_json_is_the_graph_with_provenance(netc):
    p = preview_json(netc, ELMAN)
    assert p.network == "elman" and p.ir.network == "elman"
    kinds = [n.kind for n in p.nodes]
    assert kinds.count("input") == 1 and kinds.count("output") == 2 and kinds.count("state") == 1
    (loop,) = p.clusters
    assert loop.axis == "time" and loop.returnn.name == "out" and loop.source.text == "for t in range(x.max_seq_len):"
    assert loop.torch.code.splitlines()[-1] == "for t in range(time_size):"
    nodes = {n.id: n for n in p.nodes}
    x_lin = next(n for n in p.nodes if n.label == "x_lin")
    assert x_lin.hoisted_from == loop.id and x_lin.cluster is None  # written in the loop, runs before it
    assert x_lin.returnn.code.startswith("'x_lin': {'class': 'linear', 'from': 'data:x'")
    assert x_lin.torch.code == "x_lin = torch.nn.functional.linear(x, self.x_lin.W.t(), self.x_lin.b)  # line 15"
    h = next(n for n in p.nodes if n.op == "tanh")
    assert h.cluster == loop.id and h.source.span.line == 17
    assert h.source.text == "h = tanh(Linear(hidden)(x_lin + h_prev))"
    assert h.returnn.name == "out/output" and h.returnn.kind == "activation"
    state = next(n for n in p.nodes if n.kind == "state")
    assert state.returnn.kind == "prev:output" and "'initial_output'" not in state.returnn.code  # zeros: the default
    edges = {(nodes[e.src].label, nodes[e.dst].label, e.kind) for e in p.edges}
    assert ("h", "h", "state") in edges  # tanh's value is the state's next value: RETURNN `prev:output`
    assert ("x_lin", "add", "frame") in edges and ("h", "output", "stack") in edges and ("h", "last", "last") in edges
    assert all(n.torch and (n.returnn or n.op == "zeros") for n in p.nodes)


def test_json_covers_nested_loops_and_loops_with_an_end(netc):
    nested = preview_json(netc, EXAMPLES / "nested.py")
    outer, inner = nested.clusters
    assert inner.parent == outer.id and inner.returnn.name == "out/s"
    assert any(n.hoisted_from == inner.id and n.cluster == outer.id for n in nested.nodes)
    decoder = preview_json(netc, EXAMPLES / "greedy_decoder.py")
    (end,) = [n for n in decoder.nodes if n.kind == "end"]
    assert end.cluster == decoder.clusters[1].id and "'class': 'combine'" in end.returnn.code
    assert {e.label for e in decoder.edges if e.dst == end.id} == {"", "max steps"}


def test_the_documented_schema_is_the_models_schema():
    """docs/preview-schema.json is generated: `python -m netc.preview.model > docs/preview-schema.json`."""
    assert (ROOT / "docs" / "preview-schema.json").read_text() == json_schema()


def test_dot_views_differ_in_labels_not_in_shape(netc):
    views = {v: netc("preview", ELMAN, "--format", "dot", "--view", v, check=True).stdout for v in ("returnn", "torch")}
    assert 'label="prev:output"' in views["returnn"] and 'label="next h"' in views["torch"]
    assert "activation" in views["returnn"] and "torch.tanh" in views["torch"]
    for text in views.values():
        assert text.count(" -> ") == 9 and text.count('subgraph "cluster_') == 1
        assert "constraint=false, label=" in text  # the state edge does not bend the layout
        subprocess.run(["dot", "-Tsvg", "-o", os.devnull], input=text, text=True, check=True)


def test_page_is_self_contained_and_deterministic(tmp_path, netc):
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    netc("preview", ELMAN, "-o", a, check=True)
    netc("preview", ELMAN, "-o", b, check=True)
    assert a.read_bytes() == b.read_bytes()
    html = a.read_text()
    assert not re.search(r"""(src|href|url)\s*[=(]\s*["']?(https?:)?//""", html)  # nothing fetched
    # two drawings; Graphviz for laying one out again, the data, the page's script
    assert html.count('<div class="view"') == 2 and html.count("<script") == 3


def test_user_strings_cannot_break_the_page_or_the_dot_text(tmp_path, netc):
    model = tmp_path / "hostile.py"
    model.write_text(HOSTILE)
    page = tmp_path / "hostile.html"
    netc("preview", model, "-o", page, check=True)
    html = page.read_text()
    assert html.count("<script") == 3 and html.count("</script>") == 3  # only netc's own elements
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned = 2" in html  # in the SVG: escaped text
    assert "[batch, h&quot;\\n\\l]" in html
    assert "\\u003c/script\\u003e\\u003cscript\\u003ewindow.__pwned = 3" in html  # in the JSON
    dot = netc("preview", model, "--format", "dot", check=True).stdout
    assert '[batch, h\\"\\\\n\\\\l]' in dot  # quote escaped, backslashes doubled: no dot escape reaches Graphviz


def test_mistakes_are_located_errors_or_usage_errors(tmp_path, netc):
    bad = tmp_path / "bad.py"
    bad.write_text(ELMAN.read_text().replace("h = tanh(", "h = tanh(oops + "))
    proc = netc("preview", bad, "-o", tmp_path / "bad.html")
    assert proc.returncode == 1 and f"{bad}:17:18: error: unknown name `oops`" in proc.stderr
    assert not (tmp_path / "bad.html").exists()
    assert netc("preview", ELMAN, "--watch", "-o", tmp_path / "x.html").returncode == 2
    # without Graphviz the page cannot be drawn: say so (dot and json do not need it)
    env = dict(os.environ, PATH="/nonexistent")
    from conftest import NETC

    proc = subprocess.run([str(NETC), "preview", str(ELMAN)], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "draws with Graphviz's `dot`, which is not installed" in proc.stderr
    json_proc = subprocess.run([str(NETC), "preview", str(ELMAN), "--format", "json"], capture_output=True, env=env)
    assert json_proc.returncode == 0


def test_readme_shows_compile_check_and_preview_with_a_screenshot():
    readme = (ROOT / "README.md").read_text()
    for use in ("netc compile examples/elman.py", "netc check --construct --format github", "id: netc-check"):
        assert use in readme
    assert "netc preview examples/elman.py --watch" in readme and "](docs/preview.png)" in readme
    assert (ROOT / "docs" / "preview.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# RETURNN refuses `transducer_search` (tests/test_transducer_search_errors.py), a sampling
# `choice` (tests/test_lm_fusion.py) and `ctc_prefix_search` with an LM function
# (tests/test_ctc_decoding_lm.py) or `method="flashlight"` (tests/test_ctc_decoding_flashlight.py),
# so their preview (of both targets) is that located error
RETURNN_REFUSED = {
    "transducer_search.py",
    "transducer_search_functions.py",
    "lm_sample.py",
    "ctc_decoding_lm.py",
    "ctc_decoding_flashlight.py",
    "stream_transducer.py",
    "lm_searches_after_a_choice_loop.py",
}
MODELS = sorted(EXAMPLES.glob("*.py")) + sorted(
    p for p in (ROOT / "tests" / "models").glob("*.py") if p.name not in RETURNN_REFUSED
)


def _expression_spans(path) -> dict[tuple[int, int, int, int], type]:
    """The source's expressions, loops and `if`s by span (as netc counts columns)."""
    src = read_source(str(path))
    found = {}
    for node in ast.walk(src.parse()):
        if isinstance(node, ast.expr | ast.For | ast.While | ast.If):
            s = src.node_span(node)
            found.setdefault((s.line, s.col, s.end_line, s.end_col), type(node))
    return found


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_every_model_previews_with_consistent_provenance(model):
    p = load_preview(str(model), example_network(model))
    # each op's source is its own expression's: a loop only for a loop fused into one op, an `if`
    # only for the value that merges its branches (not, say, a loop's state moved out of it)
    spans = _expression_spans(model)
    for n in p.nodes:
        if n.kind == "op":
            s = n.source.span
            kind = spans.get((s.line, s.col, s.end_line, s.end_col))
            assert kind is not None and kind not in (ast.For, ast.While) or n.fused, (n.id, n.label, n.op, s)
            assert kind is not ast.If or n.op == "where", (n.id, n.label, n.op, s)
    ids = [n.id for n in p.nodes] + [c.id for c in p.clusters]
    assert len(ids) == len(set(ids))
    assert all(e.src in ids and e.dst in ids for e in p.edges)
    for n in p.nodes:
        if n.returnn is None:  # folded away: only the zeros a state starts from (RETURNN's default),
            assert n.op in ("zeros", "empty"), n  # and the empty start of a state `cum_concat` grows
        else:
            assert n.returnn.code.startswith(repr(n.returnn.name.rsplit("/", 1)[-1])) or n.kind == "input"
        assert n.torch.code
        if n.kind == "op":
            assert n.torch.code.endswith(f"# line {n.source.span.line}") and n.source.text
    for c in p.clusters:
        assert c.torch.code.splitlines()[0].endswith(f"(line {c.source.span.line})")
        assert c.returnn.code.startswith(repr(c.returnn.name.rsplit("/", 1)[-1]))
    assert Preview.model_validate_json(p.model_dump_json()) == p
    for view in ("returnn", "torch"):
        subprocess.run(["dot", "-Tsvg", "-o", os.devnull], input=to_dot(p, view), text=True, check=True)


def test_returnn_view_draws_one_box_per_layer(netc):
    """Ops the RETURNN emitter folds into one layer (dropout, concat, a loss's logits and softmax)
    are one node of the RETURNN dot, edges between them left out; torch draws every op."""
    p = preview_json(netc, EXAMPLES / "librispeech_2018.py")
    drawn = {view: re.findall(r'^\s*"(\w+)" \[id=', to_dot(p, view), re.M) for view in ("returnn", "torch")}
    assert sorted(drawn["torch"]) == sorted(n.id for n in p.nodes)
    nodes = {n.id: n for n in p.nodes}
    layers = [nodes[i].returnn.name for i in drawn["returnn"] if nodes[i].returnn and nodes[i].kind != "state"]
    assert len(layers) == len(set(layers)) and {"lstm1_fw", "output_prob", "ctc"} <= set(layers)
    assert not any(nodes[i].op == "dropout" for i in drawn["returnn"])
    edges = re.findall(r'^\s*"(\w+)" -> "(\w+)"', to_dot(p, "returnn"), re.M)
    assert edges and all(a != b and a in drawn["returnn"] and b in drawn["returnn"] for a, b in edges)
    edge_lines = [line for line in to_dot(p, "returnn").splitlines() if " -> " in line]
    assert len(edge_lines) == len(set(edge_lines)) == len(edges)  # each drawn once
    assert 'label="module lstm1"' in to_dot(p, "torch")
