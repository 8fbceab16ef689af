"""Chunked loops, `for c in chunks(x, chunk):` (the ops are `netc.ops.chunk`'s).

`chunk = Dim("chunk", N)` is declared static; `chunks(x, chunk)` makes it the dynamic dim of
each step's frames: at most N frames, a sequence's last chunk fewer (its lengths are the step's,
so an op over it sees only valid frames). The loop itself is an ordinary loop over a dim of its
own (`<time>_chunks`), whose frames `chunk_split` and `chunk_lens` give; values over `chunk`
exist only in its body: appended, they are stacked back over `time` (`chunk_pad` in the body,
`chunk_merge` after the loop); a state or a value read after the loop cannot have it.

`chunks` is a loop iterable (`netc.ops.chunk.Chunks`, registered in `netc.ops.iterables`); these
are its rules (`RULES`), which the tracer finds through `netc.parser.iterables`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from netc.errors import CompileError
from netc.ir.loopkinds import chunk_dims, loop_chunk
from netc.ir.model import Graph, Loop, Node, Value
from netc.ir.uses import values_by_id
from netc.ir.walk import loops, ops
from netc.ops import ITERABLES, REGISTRY
from netc.parser import values as V
from netc.parser.iterables import IterableRules, IterableSpec, OpenLoop

if TYPE_CHECKING:
    from netc.parser.tracer import Tracer


@dataclass(frozen=True)
class ChunkSpec(IterableSpec):
    """`chunks(x, chunk[, axis=time])`: x's `axis` in chunks of `size` frames over `chunk`."""

    what = "`chunks(...)`, which only a loop iterates over (`for c in chunks(x, chunk):`)"

    tensor: V.TV
    axis: str
    chunk: str
    size: int

    def open(self, t: Tracer, node: ast.AST) -> tuple[ChunkLoop, list[V.TV], str]:
        return _open_chunks(t, self, node)


@dataclass
class ChunkLoop(OpenLoop):
    """A chunked loop being traced: its attrs (shared by its ops) and its lengths' frame."""

    spec: ChunkSpec
    attrs: dict
    lens: V.TV | None = None  # the step's valid frames, int32 [batch] (a frame of the loop)

    def first(self, t: Tracer, body: V.Block, frames: list[V.TV], stmt: ast.For) -> None:
        _first_frame(t, self, body, frames, stmt)

    def end_body(self, t: Tracer, body: V.Block, appends: dict) -> None:
        _pad_appends(t, self, body, appends)

    def stacked(self, t: Tracer, stack: V.TV, node: ast.AST) -> V.TV:
        return _merged(t, self, stack, node)

    def close(self, t: Tracer, loop: Loop, env: dict, line: int) -> None:
        _check_close(t, self, loop, env, line)


class _Rules(IterableRules):
    def call(self, t: Tracer, node: ast.Call) -> ChunkSpec:
        return _chunks_call(t, node)

    def check_loop(self, t: Tracer, axis: str, node: ast.AST) -> None:
        _no_loop_over_chunk(t, axis, node)

    def check_graph(self, g: Graph) -> None:
        _check_chunks(g)


RULES = _Rules()
_API = ITERABLES["chunks"].api  # the user signature


def _chunks_call(t: Tracer, node: ast.Call) -> ChunkSpec:
    """`chunks(...)` as a loop's iterable (checked here; the loop makes the ops)."""
    args, kwargs = t.call_args(node)
    try:
        x, chunk, axis = _API(*args, **kwargs)
    except TypeError:
        raise t.error(node, "use chunks(x, chunk) or chunks(x, chunk, axis=time), `chunk` a static Dim") from None
    if not isinstance(x, V.TV) or not isinstance(chunk, V.DimRef) or not (axis is None or isinstance(axis, V.DimRef)):
        raise t.error(node, "use chunks(x, chunk) with a tensor and a static Dim (the chunk's frames)")
    dt = t.dims
    if axis is None:
        dyn = dt.dynamic(x.dims)
        if len(dyn) != 1:
            raise t.error(node, f"`chunks` of [{', '.join(x.dims)}] needs `axis=` (the dynamic dim to split)")
        name = dyn[0]
    else:
        name = axis.name
        if name not in x.dims or dt[name].kind != "dynamic":
            raise t.error(node, f"`{name}` is not a dynamic dim of the tensor [{', '.join(x.dims)}]")
    d = dt[chunk.name]
    if chunk.name in _chunk_dims(t):
        raise t.error(
            node, f"`{chunk.name}` is the chunk dim of another chunked loop; declare a Dim of its own for each"
        )
    if d.kind != "static":
        raise t.error(
            node, f"`chunks` needs a static Dim for the chunk's frames (Dim({chunk.name!r}, N)), got `{chunk.name}`"
        )
    if name in _chunk_dims(t):
        raise t.error(node, f"`{name}` is a chunk's frames: a chunked loop over it is not supported")
    used = _uses_dim(t, chunk.name)
    if used is not None:
        raise t.error(
            node,
            f"`{chunk.name}` is used before (line {used}): a chunk dim is dynamic, the frames of each "
            "step's chunk; declare a Dim of its own for other uses",
        )
    return ChunkSpec(x, name, chunk.name, d.size)


def _no_loop_over_chunk(t: Tracer, axis: str, node: ast.AST) -> None:
    """A loop over a chunk's frames: its length is the step's (not supported)."""
    if axis in _chunk_dims(t):
        raise t.error(
            node,
            f"a loop over the chunk dim `{axis}` (each step's chunk) is not supported; compute over the "
            "chunk's frames at once (reductions, `dot`, `softmax` over it)",
        )


def _open_chunks(t: Tracer, spec: ChunkSpec, node: ast.AST) -> tuple[ChunkLoop, list[V.TV], str]:
    """Before the loop: the ops giving its frames (the raw chunks and their lengths) and its axis."""
    dt = t.dims
    if t.block is not t.root:
        raise t.error(node, "a chunked loop inside another loop is not supported; chunk before it, at the top level")
    pad = _fresh_static(t, f"{spec.chunk}_pad", spec.size)
    out = dt.fresh_dynamic(f"{spec.axis}_chunks").name
    known = dt.known_lengths
    if known is not None:
        known.discard(out)  # `chunk_split` makes its lengths
    # the chunk's frames: dynamic from here on (its lengths are each step's)
    d = dt[spec.chunk]
    d.kind, d.size = "dynamic", None
    d.may_be_empty = True  # a step past a sequence's last chunk has no frame of it
    d.max_frames = spec.size  # what `join_chunk` pads a chunk to (netc.ops.chunk_cache)
    if known is not None:
        known.add(spec.chunk)
    attrs = {"axis": spec.axis, "chunk": spec.chunk, "pad": pad, "out_axis": out, "size": spec.size}
    (raw,) = t.emit(REGISTRY["chunk_split"], [spec.tensor], dict(attrs), node)
    (lens,) = t.emit(REGISTRY["chunk_lens"], [spec.tensor], dict(attrs), node)
    return ChunkLoop(spec, attrs), [raw, lens], out


def _first_frame(t: Tracer, cl: ChunkLoop, body: V.Block, frames: list[V.TV], stmt: ast.For) -> None:
    """First in the body: the step's chunk over the dynamic chunk dim, bound to the loop's target."""
    raw, cl.lens = frames
    outer, t.block = t.block, body
    try:
        (c,) = t.emit(REGISTRY["chunk_frame"], [raw, cl.lens], dict(cl.attrs), stmt.iter)
        t.assign(stmt.target, c)
    finally:
        t.block = outer


def _pad_appends(t: Tracer, cl: ChunkLoop, body: V.Block, appends: dict) -> None:
    """At the end of the body, each value appended over the chunk dim as one over the static pad
    dim (`appends`: the loop's, list id -> (list, value, node))."""
    outer, t.block = t.block, body
    try:
        for key, (lst, value, node) in list(appends.items()):
            if cl.spec.chunk not in value.dims:
                continue
            (padded,) = t.emit(REGISTRY["chunk_pad"], [value, cl.lens], dict(cl.attrs), node)
            padded.value.name = padded.value.name or value.value.name
            appends[key] = (lst, padded, node)
    finally:
        t.block = outer


def _merged(t: Tracer, cl: ChunkLoop, stack: V.TV, node: ast.AST) -> V.TV:
    """After the loop, a stack of padded chunks back over the chunked dim."""
    if cl.attrs["pad"] not in stack.dims:
        return stack
    (out,) = t.emit(REGISTRY["chunk_merge"], [stack, cl.spec.tensor], dict(cl.attrs), node)
    out.value.name = stack.value.name
    return V.TV(out.value, out.block, from_list=True)


def _check_close(t: Tracer, cl: ChunkLoop, loop: Loop, env: dict, line: int) -> None:
    """A value over the chunk dim has a length per step: no state has it, and one read after
    the loop is an error there (the parser made every name assigned in the body a `last`)."""
    chunk = cl.spec.chunk
    for c in loop.carries:  # (a state starts before the loop, where no value has the dim)
        assert chunk not in c.inner.dims, c.name
    for last in [x for x in loop.lasts if chunk in x.out.dims]:
        loop.lasts.remove(last)
        env[last.name] = V.Poison(
            last.name,
            line,
            reason=f"`{last.name}` is over the chunk dim `{chunk}` of the chunked loop at line {line}, whose "
            f"length is each step's; append it to a list in the loop to read it over `{cl.spec.axis}`",
        )


def _check_chunks(g: Graph) -> None:
    """Values over a chunk dim are made and read only in its chunked loop (and loops in it)."""
    owners = {c.chunk: n for n in loops(g.body) if (c := loop_chunk(n)) is not None}
    if owners:
        _inside(g.body, frozenset(), owners, values_by_id(g))


def _inside(nodes: list[Node], allowed: frozenset[str], owners: dict[str, Loop], values: dict[int, Value]) -> None:
    for n in nodes:
        if isinstance(n, Loop):
            c = loop_chunk(n)
            _inside(n.body, allowed | {c.chunk} if c is not None else allowed, owners, values)
            continue
        dims = {d for v in [*n.outs, *(values[a] for a in n.args)] for d in v.dims if d in owners} - allowed
        if dims:
            d = sorted(dims)[0]
            raise CompileError(
                n.span,
                f"a value over `{d}` here: `{d}` is the chunk dim of the chunked loop at line "
                f"{owners[d].span.line}, and values over it exist only in that loop",
            )


def _chunk_dims(t: Tracer) -> set[str]:
    return chunk_dims(t.root.nodes)


def _uses_dim(t: Tracer, dim: str) -> int | None:
    """The line of the first value over `dim` so far (inputs, parameters, ops), else None."""
    for inp in t.inputs:
        if dim in inp.value.dims:
            return inp.span.line if inp.span is not None else 1
    if any(dim in p.dims for p in t.params):
        return 1
    for op in ops(t.root.nodes):
        if any(dim in v.dims for v in op.outs):
            return op.span.line if op.span else 1
    return None


def _fresh_static(t: Tracer, base: str, size: int) -> str:
    name, k = base, 1
    while name in t.dims.dims:
        k += 1
        name = f"{base}_{k}"
    t.dims.declare(name, size)
    return name
