"""torch's lowering: the decisions only the torch module reads, recorded on the final graph.

Runs after the common pipeline (`netc.passes.pipeline.TARGET_LOWERINGS`), on training's graph
and on its search graph; each pass here only records (RETURNN reads none of it):

- `padded_steps`: which states keep their value through padded steps and which values read after
  a loop come from a stack (`LoopCarry.frozen`, `LoopCarry.from_stack`, `LoopLast.from_stack`);
- `torch_addmm`: which adds torch computes with a bias-less Linear as one `torch.addmm`
  (`Op.torch_addmm`);
- `scan_loops`, with `--loops scan` (`PassOptions.loops`): which loops run as torch's `scan` or
  `while_loop` operator (`Loop.scan`).

(`Loop.buffers` is the exporter's: `netc_runtime.export` sets it on its own copy for ONNX.)
A pass changing a loop or a use after these would have to run them again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from netc.emit_torch import padded_steps, scan_loops, torch_addmm
from netc.ir.model import Graph
from netc.ir.verify import verify

if TYPE_CHECKING:
    from netc.passes.pipeline import PassOptions


def lower(g: Graph, options: PassOptions) -> None:
    for graph in (g, g.search) if g.search is not None else (g,):
        passes = [padded_steps, torch_addmm] + ([scan_loops] if options.loops == "scan" else [])
        for p in passes:
            p.transform(graph)
            verify(graph)
