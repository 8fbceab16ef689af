"""RETURNN names that other targets must agree on: rec layer names and TF variable names.

A loop is the rec layer `rec`, `rec_2`, ... of its block. A parameter is named by its
module path, prefixed by `<rec>/rec/` for every rec unit its layer stays in: RETURNN
trains the variables of a rec unit only when they live under the rec layer's scope.
A module used at the top level (or first in one loop, then in another) keeps the name of
its first owner; other uses share that variable. Runs last: hoisting decides placement.
"""

from __future__ import annotations

from netc.ir.model import Graph, Loop, Node
from netc.naming import Namespace

UNIT_RESERVED = {"output", "end", "data", "base", "prev"}


def transform(g: Graph) -> tuple[Graph, bool]:
    g = g.model_copy(deep=True)
    owner: dict[str, str] = {}  # module path -> scope prefix of its first use

    def block(nodes: list[Node], prefix: str, ns: Namespace) -> None:
        loops = [n for n in nodes if isinstance(n, Loop)]
        for n in loops:
            n.name = ns.fresh("rec")
        for n in nodes:  # top-level uses first: a module used there is owned there
            if not isinstance(n, Loop) and n.param and n.param not in owner:
                owner[n.param] = prefix
        for n in loops:
            block(n.body, f"{prefix}{n.name}/rec/", Namespace(UNIT_RESERVED, python=False))

    block(g.body, "", Namespace({"data", *(o.name for o in [*g.outputs, *g.losses])}, python=False))
    changed = False
    for p in g.params:
        name = f"{owner.get(p.path, '')}{p.path}/{p.role}"
        changed |= name != p.name
        p.name = name
    return g, changed
