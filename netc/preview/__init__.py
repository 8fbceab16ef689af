"""`netc preview`: the emitted graph of a model, drawn (HTML page, dot) or as data (JSON)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netc.errors import CompileError

if TYPE_CHECKING:  # not at import: `python -m netc.preview.model` (the schema) runs that module itself
    from netc.preview.model import Preview


def load_preview(model: str, network: str | None = None, source: str | None = None) -> Preview:
    """The preview of a model file (raises CompileError on user mistakes, as compiling does)."""
    from netc.compiler import compile_graph
    from netc.parser.source import read_text
    from netc.preview.graph import build_preview

    source = read_text(model) if source is None else source  # decoded as Python decodes source
    return build_preview(compile_graph(model, source=source, network=network), source)


def render_preview(model: str, network: str | None, fmt: str, view: str = "returnn") -> str:
    """The page, the dot text of one view, or the JSON document (raises CompileError, and
    GraphvizMissing for the page)."""
    p = load_preview(model, network)
    if fmt == "json":
        return p.model_dump_json(indent=1) + "\n"
    if fmt == "dot":
        from netc.preview.dot import to_dot

        return to_dot(p, view)
    from netc.preview.page import render_page

    return render_page(p)


def live_page(model: str, network: str | None, version: str) -> tuple[str, str | None]:
    """The page served by `--watch` and the compile error's first line (None: the graph), the
    page being the graph or the error with its location."""
    from netc.parser.source import read_text
    from netc.preview.page import render_error_page, render_page

    try:  # an editor may be replacing the file just now: the next change re-renders
        source = read_text(model)
    except CompileError as e:
        return render_error_page(model, e.render(), version), e.render().splitlines()[0]
    try:
        return render_page(load_preview(model, network, source), version), None
    except CompileError as e:
        return render_error_page(model, e.render(source), version), e.render(source).splitlines()[0]
