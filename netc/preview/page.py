"""A `Preview` → one self-contained HTML page: both drawings as inline SVG (laid out by
Graphviz's `dot`), the node data as JSON, the style and script inline; no network needed.

Escaping: the template autoescapes every string; the SVG is Graphviz's (it escapes the
labels); the JSON has `<`, `>` and `&` written as `\\u003c`... so `</script>` in a name or a
source line cannot end the script element; the script puts text in the page via textContent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
from markupsafe import Markup

from netc.preview.dot import VIEWS, module_groups, returnn_boxes, to_dot
from netc.preview.model import Preview

_HERE = Path(__file__).parent
_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(_HERE / "templates"),
    autoescape=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)


class GraphvizMissing(Exception):
    message = (
        "netc preview draws with Graphviz's `dot`, which is not installed (Debian/Ubuntu: apt-get install graphviz)"
    )


def script_json(value) -> Markup:
    """JSON that is safe inside a <script> element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def render_svg(dot_text: str) -> str:
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizMissing()
    proc = subprocess.run([dot, "-Tsvg"], input=dot_text, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"dot failed: {proc.stderr.strip()}")  # a netc bug: its dot text is generated
    svg = proc.stdout[proc.stdout.index("<svg") :]  # without the XML prolog, doctype and comments before
    return re.sub(r"<!--.*?-->\n?", "", svg, flags=re.S)


def _page(**fields) -> str:
    return _TEMPLATES.get_template("page.html.j2").render(
        css=Markup((_HERE / "static" / "page.css").read_text(encoding="utf-8")),
        js=Markup((_HERE / "static" / "page.js").read_text(encoding="utf-8")),
        # Graphviz as WebAssembly (viz.js, MIT; Graphviz, EPL): lays a drawing out again in the page
        viz=Markup((_HERE / "static" / "viz-global.js").read_text(encoding="utf-8")) if fields["network"] else None,
        **fields,
    )


def _live(version: str | None) -> Markup | None:
    return None if version is None else script_json({"version": version})


def render_page(p: Preview, live_version: str | None = None) -> str:
    """The page for `p`; with `live_version`, it reloads when the server's version differs."""
    data = p.model_dump(mode="json", exclude={"ir"})
    # for the script: which box draws a node in the RETURNN view, and the module boxes
    data["boxes"] = {k: v for k, v in returnn_boxes(p).items() if k != v}
    data["modules"] = [{"id": m.id, "path": m.path, "cluster": m.cluster, "nodes": m.nodes} for m in module_groups(p)]
    # each view's dot text: a collapsed loop or module is laid out again in the page, as one node
    data["dots"] = {v: to_dot(p, v) for v in VIEWS}
    return _page(
        title=f"netc preview: {p.network} ({p.source_file})",
        network=p.network,
        source_file=p.source_file,
        views=[(v, Markup(render_svg(data["dots"][v]))) for v in VIEWS],
        data=script_json(data),
        error=None,
        live=_live(live_version),
    )


def render_error_page(source_file: str, error: str, live_version: str | None = None) -> str:
    """What the page shows while the model does not compile: the error with its location."""
    return _page(
        title=f"netc preview: error in {source_file}",
        network=None,
        source_file=source_file,
        views=[],
        data=None,
        error=error,
        live=_live(live_version),
    )
