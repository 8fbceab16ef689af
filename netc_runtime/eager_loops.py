"""Eager mode's loops: which loop a Python loop is, and which loop a list was stacked in.

The model's loops run as Python loops. A value made inside one is tagged with that run of the
loop (a `LoopTag`), so a list of per-step values knows the axis to stack over. Iterating a
tensor gives the tag directly; `range` is looked up in the compiled graph by its source line
(eager mode runs the model with `range` bound to `eager_range`); a list no tag explains is
looked up in the compiled graph by its step dims, or, returned, by the output it is.
"""

from __future__ import annotations

import dis
import linecache
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any, Protocol

from netc.errors import CompileError, Span
from netc.ir.model import Graph, Loop, Node
from netc.ops.iterables import Stacker

# frames in these packages are netc's own, not user code
_RUNTIME = os.path.dirname(os.path.abspath(__file__))  # netc's packages sit side by side (no import of netc)
PKG_DIRS = tuple(os.path.join(os.path.dirname(_RUNTIME), p) + os.sep for p in ("netc_runtime", "netc"))


@dataclass(eq=False)
class LoopTag:
    """One run of one loop. A value made inside it is tagged with it, so a list of per-step
    values knows the axis (and direction) to stack over; a finished run tags nothing new."""

    axis: str
    backward: bool
    seq: int  # the run's loop events before and with its start: outer loops start before inner ones
    finished: bool = False
    steps: int = 0  # steps run so far
    line: int = 0  # the loop statement's first line, for a loop found in the graph
    include_eos: bool = True  # a loop with `end`: its appends stand before the `break`
    ended: bool = False  # `end(...)` ended it (not its bound)
    by_end: bool = False  # a `while True` loop: its steps are counted by `end(...)`
    # how a list appended in it stacks, where its loop kind says (`netc.ops.iterables.Stacker`)
    stacker: Stacker | None = None

    @property
    def stacked(self) -> int:
        """How many values a list appended to once per step holds."""
        return self.steps - (self.ended and not self.include_eos)


class SeqLen(int):
    """`x.max_seq_len` eagerly: this sequence's length, knowing its dim (for `range`)."""

    dim: str

    def __new__(cls, n: int, dim: str) -> SeqLen:
        out = super().__new__(cls, n)
        out.dim = dim
        return out


class LoopIndex(int):
    """The `t` of `for t in range(x.max_seq_len)` eagerly: `x[t]` takes the frame of its axis."""

    axis: str

    def __new__(cls, t: int, axis: str) -> LoopIndex:
        out = super().__new__(cls, t)
        out.axis = axis
        return out


class _Run(Protocol):  # what of eager's run this module reads
    loops: list[LoopTag]
    lengths: dict[str, int]
    count: int
    while_loops: dict[int, LoopTag]
    in_frame_order: list[list]  # lists of backward loops, put in frame order when their loop ended

    def tag(self, axis: str, backward: bool) -> LoopTag: ...
    def graph(self) -> Graph: ...


def run_loop(run: _Run, tag: LoopTag, items: Iterator[Any]) -> Iterator[Any]:
    """`items`, one per step, with values made meanwhile tagged with `tag`."""
    run.loops.append(tag)
    try:
        for item in items:
            tag.steps += 1
            yield item
    finally:
        _finish(run, tag)
        if tag.backward:
            _frame_order(run, tag)


def _frame_order(run: _Run, tag: LoopTag) -> None:
    """A backward loop has ended: the lists it appended to (one value a step) hold its values
    in step order, last frame first. They are the stacked tensor, aligned with the frames, in
    the compiled targets (`for b_t in bw`, `zip(fw, bw)`, `bw[t]`), so they are reversed in
    place: from now on they are in frame order, as a `for` over them needs."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(PKG_DIRS):
        f = f.f_back
    if f is None:
        return
    # a list the graph stacks in a loop that is not backward over this axis is another loop's (one
    # iterating a plain list, whose values eager mode cannot tag, and ran as many steps)
    loops = _loops(run.graph())
    stacked = {s.name for n in loops for s in n.stacks}
    backward = {s.name for n in loops if n.reverse and n.axis == tag.axis for s in n.stacks}
    for k, v in f.f_locals.items():
        if k in stacked and k not in backward:
            continue
        if isinstance(v, list) and len(v) == tag.steps and _made_in_run(v, tag) and not _nested_loops(v, tag):
            if not any(v is done for done in run.in_frame_order):
                v.reverse()
                run.in_frame_order.append(v)


def _nested_loops(items: list, tag: LoopTag) -> bool:
    """Whether every item was made in one run of a loop nested in run `tag`: the list of that
    loop (the last step's inner list, as long as the outer loop ran steps), not of this one."""
    inner = [set(i.frames[i.frames.index(tag) + 1 :]) if tag in getattr(i, "frames", ()) else set() for i in items]
    return bool(inner) and bool(set.intersection(*inner))


def _made_in_run(x: Any, tag: LoopTag) -> bool:
    """Whether `x` (a value, or a list of them) holds a value made in the loop run `tag`."""
    if isinstance(x, list):
        return any(_made_in_run(i, tag) for i in x)
    return tag in getattr(x, "frames", ())


def _finish(run: _Run, tag: LoopTag) -> None:
    run.loops.remove(tag)
    tag.finished = True
    run.count += 1


def eager_range(run: _Run | None, args: tuple) -> Iterator[int] | range:
    """`range(...)` in the model's code: a loop of the model, tagged as the graph has it."""
    r = range(*args)
    if run is None:
        return r
    line = caller_line()
    loops = [n for n in _loops(run.graph()) if n.span.line == line]
    bound = args[0] if len(args) == 1 else None
    if isinstance(bound, SeqLen) and all(n.end is None for n in loops):  # one step per frame of its dim
        tag = run.tag(bound.dim, False)
        tag.line = line
        return run_loop(run, tag, (LoopIndex(t, bound.dim) for t in r))
    tag = _tag_for(run, loops)
    return r if tag is None else run_loop(run, tag, iter(r))


def _tag_for(run: _Run, loops: list[Loop]) -> LoopTag | None:
    """A tag for a run of the graph loop `loops` are copies of (a helper inlined several times),
    if they agree on the axis: a loop with `end` makes a dim of its own at each copy."""
    kinds = {(n.axis, n.include_eos) for n in loops}
    if len(kinds) != 1:  # not a loop of the graph (dropped: nothing reads it), or copies of it
        return None
    (axis, include_eos), line = kinds.pop(), loops[0].span.line
    tag = run.tag(axis, False)
    tag.line, tag.include_eos = line, include_eos
    return tag


def end_step(run: _Run, ended: bool) -> LoopTag | None:
    """`end(...)` ran at a step of its loop: a `while True` loop gets its tag here (the values of
    its first step made before this are not tagged; they need not be), and each `end` counts a
    step of it; any loop it ends records that it ended early. The loop's tag, if found."""
    line = caller_line()
    around = [n for n in _loops(run.graph()) if n.end is not None and n.span.line <= line <= n.span.end_line]
    if not around:
        return None
    start = max(n.span.line for n in around)
    tag = run.loops[-1] if run.loops else None
    if tag is None or tag.line != start:  # the first step of a `while True` loop
        tag = _tag_for(run, [n for n in around if n.span.line == start])
        if tag is None:
            return None
        tag.by_end = True
        run.loops.append(tag)
        run.while_loops[tag.seq] = tag
    if tag.by_end:
        tag.steps += 1
    if ended:
        tag.ended = True
        if tag.by_end:
            _finish(run, tag)
    return tag


def caller_line() -> int:
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(PKG_DIRS):
        f = f.f_back
    return f.f_lineno if f is not None else 0


def _loops(g: Graph) -> list[Loop]:
    """Every loop of the graph, nested ones too."""
    found: list[Loop] = []

    def walk(nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                found.append(n)
                walk(n.body)

    walk(g.body)
    return found


def stacking_loop(
    items: list, run: _Run, output: str | None = None, listed: list | None = None, outer: LoopTag | None = None
) -> tuple[str, bool, LoopTag | None]:
    """The loop a list was appended in: the outermost finished loop its items were made in, if
    it ran one step per item and they are distinct values. Items made before that loop (a state's initial value appended at
    the first step) or in loops nested in it (a fresh run per step) agree on it. Otherwise the
    compiled graph: the loop whose stack the returned `output` is, else the only loop with
    stacks of these step dims (and, over an input dim, this many steps). With the run's tag, if
    a tag told. Several such loops: the one whose stack has the name the user's code gives the
    list (`listed`, the user's list object). `outer`: the loop whose list this inner list was
    appended to (finished too, it is not this list's loop)."""
    if output is not None:  # a returned list: the graph says which loop stacks it (a tag can mislead:
        # one item made in a finished loop that ran one step looks like that loop's stack)
        loop = output_loop(run.graph(), output)
        if loop is not None:
            return loop.axis, loop.reverse, None
    outermost = {_made_in(i, run, outer) for i in items} - {None}
    # a step makes its values afresh: the same value appended twice was made before the appending
    # loop (a later loop appending a value of a finished one), whose steps then say nothing; a
    # `while True` run's tag is found for a value made before its first `end` (repeated alike)
    if len(outermost) == 1:
        tag = outermost.pop()
        # (only for values made before the run: one made in it and appended again was appended
        # by a later loop)
        distinct = len({id(i) for i in items}) == len(items)
        before = tag.by_end and not any(tag in getattr(i, "frames", ()) for i in items)
        if tag.stacked == len(items) and (distinct or before) and _named_so(run, items, listed, tag):
            return tag.axis, tag.backward, tag
    step_dims = items[0].dims
    found: dict[tuple[str, bool], set[str]] = {}  # (axis, reverse) -> names of its such stacks
    for n in _loops(run.graph()):
        # a dim made by a loop (with `end`) has no input length to compare
        fits = n.end is not None or run.lengths.get(n.axis, len(items)) == len(items)
        for s in n.stacks:
            if fits and tuple(d for d in s.out.dims if d != n.axis) == step_dims:
                found.setdefault((n.axis, n.reverse), set()).add(s.name)
    if len(found) > 1:  # the loops that stack a list of this name (as the user's code names it)
        names = _user_names(items if listed is None else listed)
        found = {k: v for k, v in found.items() if v & names} or found
    if len(found) != 1:
        raise CompileError(
            user_span(),
            f"eager mode cannot tell which loop this list of {len(items)} [{', '.join(step_dims)}] values "
            f"was stacked in ({'several' if found else 'no'} loops stack such values); return the list "
            "as an output, or loop over a tensor (`for x_t in x`) or `range(x.max_seq_len)`",
        )
    return (*next(iter(found)), None)


def _named_so(run: _Run, items: list, listed: list | None, tag: LoopTag) -> bool:
    """Whether the loop run `tag` may stack the list: no loop of the graph stacks a list of the
    user's name for it, or one over the tag's axis and direction does. A single item made in a
    finished loop of one step and appended once by a later loop would otherwise look like the
    first loop's stack."""
    names = _user_names(items if listed is None else listed)
    ways = {(n.axis, n.reverse) for n in _loops(run.graph()) for s in n.stacks if s.name in names}
    return not ways or (tag.axis, tag.backward) in ways


def empty_stack(run: _Run, items: list) -> tuple[tuple[str, ...], str, str, str | None] | None:
    """An empty list (its loop stacked nothing for this sequence: no step ran, or a loop with
    `end` ended at its first step before its appends) as the compiled graph stacks it: the dims,
    loop axis, dtype and class dim of the stacks named as the user's code names the list, if
    they agree (no value tells them)."""
    names = _user_names(items)
    found = {
        (s.out.dims, n.axis, s.out.dtype, s.out.sparse_dim)
        for n in _loops(run.graph())
        for s in n.stacks
        if s.name in names
    }
    return found.pop() if len(found) == 1 else None


def _user_names(obj: Any) -> set[str]:
    """The names the user's code (its innermost frame) binds to `obj`: a list's, which the
    compiled graph gives its stack."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(PKG_DIRS):
        f = f.f_back
    return set() if f is None else {k for k, v in f.f_locals.items() if v is obj}


def list_made_in(item: Any, run: _Run, outer: LoopTag | None = None) -> LoopTag | None:
    """`_made_in` of a list's first item (a list: of its first item)."""
    while isinstance(item, list):
        if not item:
            return None
        item = item[0]
    return _made_in(item, run, outer)


def _made_in(item: Any, run: _Run, outer: LoopTag | None = None) -> LoopTag | None:
    """The outermost finished loop run `item` was made in. A `while True` loop's run starts at
    its first `end(...)`: a value made in its first step before that, with no loop starting or
    ending in between, is of that run too."""
    tag = next((t for t in item.frames if t.finished and t is not outer), None)
    return tag if tag is not None else run.while_loops.get(item.serial + 1)


def output_loop(g: Graph, output: str) -> Loop | None:
    ids = {o.value for o in g.outputs if o.name == output}
    found: list[Loop] = []

    def walk(nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                if any(s.out.id in ids for s in n.stacks):
                    found.append(n)
                walk(n.body)

    walk(g.body)
    return found[0] if len(found) == 1 else None


def unbound_after_end(e: UnboundLocalError, b: int) -> CompileError:
    """An unbound local read in the model, for sequence `b`: a name bound only in a loop that ran
    no step for it (documented: docs/language.md, Eager mode). Also a safety net: the compiler
    rejects reading a name no path binds, and one bound only after an `if end(...): break` (a
    loop that ends at its first step never binds it)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    found = re.search(r"'(.+?)'", str(e))
    name = found.group(1) if found else "?"
    span = None
    if tb is not None:
        code, at = tb.tb_frame.f_code, tb.tb_lasti
        # the load of `name` (CPython may report a fused load of the name before it)
        at = next((i.offset for i in dis.get_instructions(code) if i.offset >= at and i.argval == name), at)
        span = frame_span(code, at)
    return CompileError(
        span,
        f"`{name}` has no value for sequence {b} of the batch: it is assigned only in the body of a loop "
        "that ran no step for it (a dim with no frame for that sequence), or after `if end(...): break` "
        "of a loop that ended at its first step; eager mode, as Python, has no value for it then",
    )


def user_span() -> Span | None:
    """Where the user's code is now: the innermost frame outside netc's packages."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(PKG_DIRS):
        f = f.f_back
    return None if f is None else frame_span(f.f_code, f.f_lasti)


def frame_span(code: CodeType, lasti: int) -> Span | None:
    """The source range of the instruction at `lasti` of `code`."""
    line, end_line, col, end_col = list(code.co_positions())[lasti // 2]
    if line is None:
        return None
    path = code.co_filename
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path  # as the compiler shows it

    def chars(n: int | None, at: int | None) -> int:  # CPython counts UTF-8 bytes, spans characters
        text = linecache.getline(path, at or line).encode()
        return len(text[: n or 0].decode(errors="ignore"))

    return Span(
        file=shown, line=line, col=chars(col, line), end_line=end_line or line, end_col=chars(end_col, end_line)
    )
