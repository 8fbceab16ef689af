"""torch's lowering: the decisions only the torch module reads, in torch's own table.

Runs after the common pipeline (`netc.passes.pipeline.TARGET_LOWERINGS`), on training's graph
and on its search graph; each pass here only records, in the graph's `TorchDecisions`
(`netc.emit_torch.decisions`, kept in `Graph.lowerings`; RETURNN reads none of it):

- `padded_steps`: which states keep their value through padded steps and which values read after
  a loop come from a stack (`frozen`, `from_stack`);
- `torch_addmm`: which adds torch computes with a bias-less Linear as one `torch.addmm` (`addmm`);
- `scan_loops`, with `--loops scan` (`TorchOptions.loops`, given in `PassOptions.targets`):
  which loops run as torch's `scan` or `while_loop` operator (`scan`).

(`buffers` is the exporter's: `netc_runtime.export` sets it on its own copy for ONNX.)
A pass changing a loop or a use after these runs them again (`lower` without options:
`inference_graph`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from netc.emit_torch import padded_steps, scan_loops, torch_addmm
from netc.emit_torch.decisions import TARGET, TorchDecisions, check, decisions
from netc.ir.model import Graph

if TYPE_CHECKING:
    from netc.passes.pipeline import PassOptions


@dataclass(frozen=True)
class TorchOptions:
    """torch's lowering options (in `PassOptions.targets`; the common passes never read them)."""

    # how torch runs loops: "python" (a `for`; the module scripts with TorchScript) or "scan"
    # (torch's `scan` operator where it can: `torch.export` and `torch.compile` keep the loop)
    loops: str = "python"


def torch_options(loops: str = "python") -> tuple[TorchOptions]:
    """`PassOptions.targets` with torch's loops run as `loops` (`--loops`)."""
    return (TorchOptions(loops=loops),)


def lower(g: Graph, options: PassOptions | None = None) -> None:
    """`options` None: again, as `g` was lowered before (its `--loops`, the exporter's `buffers`)."""
    own = None if options is None else next((o for o in options.targets if isinstance(o, TorchOptions)), TorchOptions())
    for graph in (g, g.search) if g.search is not None else (g,):
        before = graph.lowerings.get(TARGET)
        if own is not None:
            _lower(graph, TorchDecisions(loops=own.loops))
        elif isinstance(before, TorchDecisions):
            _lower(graph, TorchDecisions(loops=before.loops, buffers=before.buffers))
        else:
            _lower(graph, TorchDecisions())


def _lower(g: Graph, table: TorchDecisions) -> None:
    g.lowerings[TARGET] = table
    for p in [padded_steps, torch_addmm] + ([scan_loops] if table.loops == "scan" else []):
        p.transform(g)
        check(g)


def lowered(g: Graph) -> TorchDecisions:
    """`g`'s decisions, for its emitter; a graph the pipeline did not lower (one made by hand) is
    lowered here with Python loops."""
    if TARGET not in g.lowerings:
        _lower(g, TorchDecisions())
    return decisions(g)
