"""RETURNN names that other targets must agree on: rec layer names and TF variable names.

A loop's rec layer is named from the source: after its first stacked list (`out`), else the
first value read after it, else its first state, else `loop`. A parameter is named by its
module path, prefixed by `<rec>/rec/` for every loop the module is called in *in the source*:
RETURNN trains the variables of a rec unit only when they live under the rec layer's scope,
and a layer keeps its absolute name scope wherever it ends up. So names do not depend on
hoisting (or on RETURNN moving layers out in training), and a checkpoint fits every config
of the model. A module used at the top level (or first in one loop, then in another) keeps
the name of its first owner; other uses share that variable. Runs before hoisting.
"""

from __future__ import annotations

from netc.ir.model import Graph, Loop, Node
from netc.naming import Namespace

UNIT_RESERVED = {"output", "end", "data", "base", "prev"}


def transform(g: Graph) -> tuple[Graph, bool]:
    owner: dict[str, str] = {}  # module path -> scope prefix of its first use
    root = {"data", "output", *(o.name for o in [*g.outputs, *g.losses])}
    _block(g.body, "", Namespace(root, python=False, letter_first=True), owner)
    changed = False
    for p in g.params:
        name = f"{owner.get(p.path, '')}{p.path}/{p.role}"
        changed |= name != p.name
        p.name = name
    return g, changed


def _block(nodes: list[Node], prefix: str, ns: Namespace, owner: dict[str, str]) -> None:
    # a function of its own, not a closure calling itself (a reference cycle, freed only by
    # the cyclic collector)
    loops = [n for n in nodes if isinstance(n, Loop)]
    for n in loops:
        n.name = ns.fresh(_hint(n), "loop")
    for n in nodes:  # top-level uses first: a module used there is owned there
        if not isinstance(n, Loop):  # (a tied parameter's use counts as its module's)
            for path in sorted(n.param_paths()):
                owner.setdefault(path, prefix)
    for n in loops:
        _block(n.body, f"{prefix}{n.name}/rec/", Namespace(UNIT_RESERVED, python=False, letter_first=True), owner)


def _hint(n: Loop) -> str:
    """What the user calls the loop's result: its first stacked list, else a value after it."""
    names = [s.name for s in n.stacks] + [ll.name for ll in n.lasts] + [c.name for c in n.carries]
    return names[0] if names else "loop"
