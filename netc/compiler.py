"""The compiler as library functions: parse → passes → emit. The CLI is a thin layer over this.

Emitters are imported when a target is asked for: `netc compile --target torch` never loads
the RETURNN emitter (the CLI's start-up time is most of a small model's compile time).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from netc.ir.model import Graph
from netc.parser import parse_file
from netc.passes.pipeline import DEFAULT_OPTIONS, PassOptions, run_passes


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Compiling allocates many objects that live until it ends (the IR, names, lines) and makes
    no reference cycles, so CPython's cyclic collector would only scan the growing graph again
    and again, at a cost that grows faster than the model. Paused while compiling; restored
    (unless the caller had it off) when done, also on errors."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@_no_cyclic_gc()
def _emit_returnn(g: Graph) -> str:
    from netc.emit_tf.emitter import emit_returnn

    return emit_returnn(g)


@_no_cyclic_gc()
def _emit_torch(g: Graph) -> str:
    from netc.emit_torch.module import emit_torch

    return emit_torch(g)


@_no_cyclic_gc()
def _emit_returnn_torch(g: Graph) -> str:
    from netc.emit_returnn_torch.emitter import emit_returnn_torch

    return emit_returnn_torch(g)


TARGETS: dict[str, Callable[[Graph], str]] = {
    "returnn": _emit_returnn,
    "torch": _emit_torch,
    "returnn-torch": _emit_returnn_torch,
}
CONFIG_TARGETS = ("returnn", "returnn-torch")  # RETURNN configs: a base config merges into them


@_no_cyclic_gc()
def compile_graph(
    path: str, source: str | None = None, network: str | None = None, options: PassOptions = DEFAULT_OPTIONS
) -> Graph:
    """Parsed and optimised IR of a model file (raises CompileError on user mistakes)."""
    return run_passes(parse_file(path, source, network), options)


def compile_file(path: str, target: str, network: str | None = None, options: PassOptions = DEFAULT_OPTIONS) -> str:
    return TARGETS[target](compile_graph(path, network=network, options=options))
