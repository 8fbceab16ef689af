"""The compiler as library functions: parse → passes → emit. The CLI is a thin layer over this."""

from __future__ import annotations

from netc.emit_returnn_torch.emitter import emit_returnn_torch
from netc.emit_tf.emitter import emit_returnn
from netc.emit_torch.emitter import emit_torch
from netc.ir.model import Graph
from netc.parser import parse_file
from netc.passes.pipeline import run_passes

TARGETS = {"returnn": emit_returnn, "torch": emit_torch, "returnn-torch": emit_returnn_torch}
CONFIG_TARGETS = ("returnn", "returnn-torch")  # RETURNN configs: a base config merges into them


def compile_graph(path: str, source: str | None = None, network: str | None = None) -> Graph:
    """Parsed and optimised IR of a model file (raises CompileError on user mistakes)."""
    return run_passes(parse_file(path, source, network))


def compile_file(path: str, target: str, network: str | None = None) -> str:
    return TARGETS[target](compile_graph(path, network=network))
