"""A readable text form of the IR, for `netc explain` and debugging."""

from __future__ import annotations

from netc.ir.model import Graph, Loop, Node, Value


def _v(v: Value) -> str:
    name = f" {v.name}" if v.name else ""
    return f"%{v.id}{name}: {v.dtype}[{', '.join(v.dims)}]"


def _ref(i: int) -> str:
    return f"%{i}"


class _Notes:
    """What the targets' lowerings decided on a graph (`Graph.lowerings`), as text the printer
    appends: each target's table may answer `note(where, obj)` (`where`: "loop", "carry",
    "final", "last" or "op"); the printer knows none of their types."""

    def __init__(self, g: Graph):
        self.tables = [t for t in g.lowerings.values() if hasattr(t, "note")]

    def __call__(self, where: str, obj) -> str:
        return "".join(t.note(where, obj) for t in self.tables)


def _nodes(nodes: list[Node], indent: str, out: list[str], note: _Notes) -> None:
    for n in nodes:
        if isinstance(n, Loop):
            how = " backwards" if n.reverse else ""
            if n.end is not None:
                limit = (
                    f", at most %{n.bound} steps"
                    if n.bound is not None
                    else f", at most {n.max_steps} steps"
                    if n.max_steps
                    else ""
                )
                how = f" until end %{n.end} ({'including' if n.include_eos else 'excluding'} the ending step{limit})"
            name = f" {n.name}" if n.name else ""
            out.append(f"{indent}loop{name} over {n.axis}{how}  # line {n.span.line}")
            if text := note("loop", n):  # e.g. a search's step limit, computed in the loop
                out.append(f"{indent}  {text}")
            for s in n.seqs:
                out.append(f"{indent}  seq {_v(s.inner)} = frame of {_ref(s.outer)}")
            for i in n.invariants:
                out.append(f"{indent}  invariant {_v(i.inner)} = {_ref(i.outer)}")
            for c in n.carries:
                out.append(
                    f"{indent}  carry {c.name}: {_v(c.inner)} init {_ref(c.init)} next {_ref(c.next)}{note('carry', c)}"
                )
            _nodes(n.body, indent + "  ", out, note)
            for c in n.carries:
                if c.out is not None:
                    out.append(f"{indent}  -> {_v(c.out)} = final {c.name}{note('final', c)}")
            for s in n.stacks:
                out.append(f"{indent}  -> {_v(s.out)} = stack {_ref(s.value)}")
            for ll in n.lasts:
                held = f" (assigned after the end, from {_ref(ll.init)})" if ll.after_end else ""
                out.append(f"{indent}  -> {_v(ll.out)} = last {_ref(ll.value)}{held}{note('last', ll)}")
        else:
            outs = ", ".join(_v(o) for o in n.outs)
            attrs = "".join(f" {k}={val!r}" for k, val in n.attrs.items() if k != "params" or not n.unfused)
            if n.unfused:  # the parameters of the modules it was fused from
                attrs += " params=" + ", ".join(f"{r}:{ref[0]}/{ref[1]}" for r, ref in n.attrs["params"].items() if ref)
            param = f" param={n.param}" if n.param else ""
            param += note("op", n)
            out.append(f"{indent}{outs} = {n.op}({', '.join(map(_ref, n.args))}){attrs}{param}  # line {n.span.line}")
            if n.unfused:  # what a pass fused into this op (a target without a native op emits it)
                out.append(f"{indent}  # fused: {n.op} runs as one native call where the target has one, else as:")
                _nodes(n.unfused, indent + "  | ", out, note)


def print_graph(g: Graph) -> str:
    out = [f"network {g.network}  # {g.source_file}"]
    out += [f"  dim {d.name}: {d.kind}{'' if d.size is None else f' {d.size}'}" for d in g.dims]
    out += [f"  input {i.name} {_v(i.value)}" for i in g.inputs]
    out += [f"  param {p.name} [{', '.join(p.dims)}]" for p in g.params]
    _nodes(g.body, "  ", out, _Notes(g))
    out += [f"  output {o.name} = {_ref(o.value)}" for o in g.outputs]
    out += [f"  loss {o.name} = sum of {_ref(o.value)} over valid frames" for o in g.losses]
    text = "\n".join(out) + "\n"
    if g.search is not None:  # what a beam search runs: the choice loop as written, its own value ids
        text += "\nsearch " + print_graph(g.search)
    return text
