"""The IR's one walker: every node of a block and of the loops nested in it, in program order.

Passes and emitters that need every op (or every loop) of a graph walk it with these instead
of each writing its own recursion over `Loop.body`; a pass whose walk is a rewrite (it keeps a
block's state, or changes a body as it goes) still recurses itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from netc.ir.model import Loop, Node, Op


def walk(nodes: list[Node], *, unfused: bool = False, regions: bool = False) -> Iterator[Node]:
    """Each node, a loop before its body. `unfused`: also the nodes a fused op keeps
    (`Op.unfused`), after the op; `regions`: also the bodies of the functions an op calls
    (`Op.regions`). An iterative walk: a deep nest costs no Python frames."""
    todo = list(reversed(nodes))
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, Loop):
            todo.extend(reversed(n.body))
            continue
        if regions:
            for r in reversed(n.regions):
                todo.extend(reversed(r.body))
        if unfused:
            todo.extend(reversed(n.unfused))


def ops(nodes: list[Node], *, unfused: bool = False, regions: bool = False) -> Iterator[Op]:
    """Each op of `walk`."""
    return (n for n in walk(nodes, unfused=unfused, regions=regions) if isinstance(n, Op))


def loops(nodes: list[Node], *, unfused: bool = False) -> Iterator[Loop]:
    """Each loop of `walk`, nested ones included (those a fused op keeps with `unfused`)."""
    return (n for n in walk(nodes, unfused=unfused) if isinstance(n, Loop))


def param_paths(nodes: list[Node]) -> set[str]:
    """Module paths of the parameters the ops of these nodes (loops included) use."""
    out: set[str] = set()
    for op in ops(nodes):
        out |= op.param_paths()
    return out


def loop_key(n: Loop) -> int:
    """A loop's identity that survives copies of its graph (value ids do), for a target's table
    of decisions (`Graph.lowerings`): its first block argument's id, else its first result's."""
    return (n.block_args() or n.results())[0].id
