"""What a search computes: the outputs it returns, and what they are computed from.

For a graph that only searches (`Graph.search`): a search returns the outputs stacked in the
`choice` loop, for each sequence's best hypothesis (`netc.ir.search`); values after the loop
(a state's value after it, anything computed from its stacks) and losses are training's only.
Computed in a search they would be one per hypothesis with no best one chosen, which RETURNN
cannot carry on after a loop (a layer reading a value of the loop's last step has the beam but
no search choices). This pass drops the other outputs and the losses; `dce` then removes what
only they read, the loop's results among it. A graph whose choice loop stacks no output keeps
them all (`search_plan` refuses it where the search is asked for).
"""

from __future__ import annotations

from netc.ir.model import Graph, Loop


def transform(g: Graph) -> tuple[Graph, bool]:
    stacked = {s.out.id for n in g.body if isinstance(n, Loop) and n.target is not None for s in n.stacks}
    returned = [o for o in g.outputs if o.value in stacked]
    if not returned or (len(returned) == len(g.outputs) and not g.losses):
        return g, False
    g.outputs, g.losses = returned, []
    return g, True
