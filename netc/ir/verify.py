"""The IR verifier, run after parsing and after every pass: a failure is a compiler bug."""

from __future__ import annotations

from netc.ir.model import Graph, Loop, Node


class IRError(AssertionError):
    pass


def verify(g: Graph) -> None:
    top: set[int] = set()
    v = _Verifier({d.name for d in g.dims})
    for inp in g.inputs:
        v.define(inp.value)
        top.add(inp.value.id)
    v.block(g.body, top)
    for o in [*g.outputs, *g.losses]:
        if o.value not in top:
            raise IRError(f"output {o.name} refers to an undefined value")
    names = [o.name for o in [*g.outputs, *g.losses]]
    if len(set(names)) != len(names):
        raise IRError("duplicate output names")
    if g.search is not None:
        if g.search.search is not None or g.search.params != g.params:
            raise IRError("a search graph has the training graph's parameters and no search graph")
        verify(g.search)


class _Verifier:
    """One walk's state. A class rather than nested functions: recursive closures are reference
    cycles, which keep the walk's sets alive until the next cyclic collection."""

    def __init__(self, dims: set[str]):
        self.dims = dims
        self.seen: set[int] = set()
        self.unfused: list[list[int]] = []  # ids defined by each fused op's unfused nodes being checked

    def define(self, v) -> None:
        if v.id in self.seen:
            raise IRError(f"value %{v.id} defined twice")
        for d in v.dims:
            if d not in self.dims:
                raise IRError(f"value %{v.id} has undeclared dim {d}")
        self.seen.add(v.id)
        if self.unfused:
            self.unfused[-1].append(v.id)

    def block(self, nodes: list[Node], visible: set[int]) -> None:
        define, need = self.define, _need
        for n in nodes:
            if isinstance(n, Loop):
                inner: set[int] = set()
                for s in n.seqs:
                    need(s.outer, visible, n)
                    define(s.inner)
                    inner.add(s.inner.id)
                for i in n.invariants:
                    need(i.outer, visible, n)
                    define(i.inner)
                    inner.add(i.inner.id)
                for c in n.carries:
                    need(c.init, visible, n)
                    define(c.inner)
                    inner.add(c.inner.id)
                self.block(n.body, inner)
                if n.end is not None:
                    need(n.end, inner, n)
                if n.bound is not None:
                    need(n.bound, visible, n)
                for c in n.carries:
                    need(c.next, inner, n)
                for s in n.stacks:
                    need(s.value, inner, n)
                    if n.axis not in s.out.dims:
                        raise IRError(f"stack %{s.out.id} lacks the loop axis")
                for ll in n.lasts:
                    need(ll.value, inner, n)
                    if ll.init is not None:
                        need(ll.init, inner, n)
                for r in n.results():
                    define(r)
                    visible.add(r.id)
            else:
                for a in n.args:
                    need(a, visible, n)
                if n.unfused:  # what a fused op stands for: reads what it may, gives its results
                    local = _Overlay(visible)
                    self.unfused.append([])
                    self.block(n.unfused, local)
                    if not all(o.id in local for o in n.outs):
                        raise IRError(f"{n.op} at line {n.span.line}: its unfused nodes do not give its results")
                    # the op defines those results itself (no copies of `seen` or `visible` per
                    # fused op: they grow with the graph)
                    self.seen.difference_update(self.unfused.pop())
                for o in n.outs:
                    define(o)
                    visible.add(o.id)


def _need(i: int, visible: set[int], n) -> None:
    if i not in visible:
        raise IRError(f"%{i} used by {getattr(n, 'op', 'loop')} at line {n.span.line} is not defined in its block")


class _Overlay(set):
    """The values visible in a fused op's unfused nodes: their own over the enclosing block's
    (which are not copied)."""

    def __init__(self, below: set[int]):
        super().__init__()
        self.below = below

    def __contains__(self, i: object) -> bool:
        return set.__contains__(self, i) or i in self.below
