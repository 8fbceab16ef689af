"""Inference: the graph without its losses and what only they compute.

Not in the pipeline: `netc compile --inference` and `netc export` ask for it. Returns a copy
(the caller keeps the training graph). `keep_params`: the parameters stay those of the training
graph, so one `state_dict` loads into both modules (an auxiliary loss's layer is then a
parameter nothing reads); otherwise only those the outputs and the search use.
"""

from __future__ import annotations

import copy

from netc.ir.model import Graph
from netc.passes import dce
from netc.passes.pipeline import lower_targets


def inference_graph(g: Graph, keep_params: bool = False) -> Graph:
    if not g.losses:
        return g
    params = g.params
    g = copy.deepcopy(g)
    g.losses = []
    g, _ = dce.transform(g)
    # the targets' decisions were made on the training graph: a stack read only by a loss (gone
    # now) no longer gives a state's last frame
    lower_targets(g)
    if keep_params:
        g.params = list(params)
        if g.search is not None:
            g.search.params = list(params)
    elif g.search is not None:  # the module has the parameters training or its search uses
        used = {p.name for p in [*g.params, *g.search.params]}
        g.params = g.search.params = [p for p in params if p.name in used]
    return g
