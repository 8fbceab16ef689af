"""`netc preview`: the emitted graph of a model, drawn (HTML page, dot) or as data (JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # not at import: `python -m netc.preview.model` (the schema) runs that module itself
    from netc.preview.model import Preview


def load_preview(model: str, network: str | None = None, source: str | None = None) -> Preview:
    """The preview of a model file (raises CompileError on user mistakes, as compiling does)."""
    from netc.compiler import compile_graph
    from netc.preview.graph import build_preview

    source = Path(model).read_text(encoding="utf-8") if source is None else source
    return build_preview(compile_graph(model, source=source, network=network), source)
