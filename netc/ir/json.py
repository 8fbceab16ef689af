"""The IR as JSON (`netc explain --json`, the project cache, the preview), through pydantic.

pydantic is imported here, on first use, and not by the IR itself: building its validators
costs more than a whole compile of a small model, and most commands never need JSON.
"""

from __future__ import annotations

from functools import cache

from netc.ir.model import Graph


@cache
def _adapter():
    from pydantic import TypeAdapter

    return TypeAdapter(Graph)


def graph_to_json(g: Graph, indent: int | None = None) -> str:
    return _adapter().dump_json(g, indent=indent).decode()


def graph_from_json(text: str | bytes) -> Graph:
    return _adapter().validate_json(text)
