"""What `netc preview` draws, as data: the graph of the optimised IR with, for every node, where
it came from (source span and line) and what each target emitted for it (RETURNN layer and dict
entry, torch line). `netc preview --format json` prints a `Preview`; its JSON schema is
docs/preview-schema.json (`python -m netc.preview.model` writes it).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from netc.errors import Span
from netc.ir.model import Graph

NodeKind = Literal["input", "op", "state", "end", "output", "loss"]
# data: a value read in the same block; invariant: an outer value read in a loop (RETURNN `base:`);
# frame: one frame per step of an outer sequence (`rec_unstack`); init: a state's initial value;
# state: a state's value for the next step (RETURNN `prev:`); stack: per-step values stacked after
# the loop; last: a value at each sequence's last step; end: the loop's end condition or limit
EdgeKind = Literal["data", "invariant", "frame", "init", "state", "stack", "last", "end"]


class Source(BaseModel):
    span: Span
    text: str = Field(description="The span's source lines (at most three; a loop's head line), dedented.")


class Emitted(BaseModel):
    """What one target emitted for a node."""

    name: str = Field(description="RETURNN: the layer's path (`rec/h`); torch: the variable.")
    kind: str = Field(description="RETURNN: the layer class; torch: the operation.")
    code: str = Field(description="RETURNN: the layer's dict entry; torch: the emitted line(s).")


class PreviewNode(BaseModel):
    id: str
    kind: NodeKind
    label: str = Field(description="The user's name for it, else the op.")
    names: list[str] = Field(
        default_factory=list,
        description="The variables the source assigns its expression to (`scores = ...`), where one is not "
        "the label (a per-step value moved out of its loop is labelled by the list it is stacked into).",
    )
    op: str | None = Field(None, description="The op's registry key (kind `op`).")
    value: int | None = Field(None, description="The IR value id it defines (its first, for several).")
    dims: list[list[str]] = Field(default_factory=list, description="Dims of each value it defines.")
    cluster: str | None = Field(None, description="The id of the loop it is in, if any.")
    hoisted_from: str | None = Field(
        None, description="Written in this loop's body, moved out by loop-invariant hoisting."
    )
    fused: str | None = Field(
        None, description="A loop the compiler runs as one native op: the op (`lstm_loop`, `gru_loop`)."
    )
    source: Source | None = None
    returnn: Emitted | None = Field(
        None, description="None for an op no RETURNN layer does (zeros a state starts from: RETURNN's default)."
    )
    torch: Emitted | None = None


class PreviewEdge(BaseModel):
    src: str
    dst: str
    kind: EdgeKind
    label: str = ""


class PreviewCluster(BaseModel):
    """A loop: a RETURNN `rec` layer, a torch `for`/`while` loop."""

    id: str
    parent: str | None = None
    label: str
    axis: str
    source: Source
    returnn: Emitted | None = None
    torch: Emitted | None = None


class Preview(BaseModel):
    format: Literal["netc-preview"] = "netc-preview"
    version: Literal[1] = 1
    source_file: str
    network: str
    nodes: list[PreviewNode]
    edges: list[PreviewEdge]
    clusters: list[PreviewCluster]
    ir: Graph = Field(description="The optimised IR the graph was drawn from (as `netc explain --json`).")


def json_schema() -> str:
    return json.dumps(Preview.model_json_schema(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(json_schema(), end="")
