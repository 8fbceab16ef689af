"""Eager execution: the model file runs as plain Python, one sequence at a time.

This is the reference semantics (LANGUAGE.md §1): no padding, no state analysis. Each
sequence of a batch is cut to its own lengths and the user's function runs literally on
it (a batch of one); the results are padded back into a batch. Only parameter identity
(which constructor call is which parameter) and dim names come from the compiler.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
from dataclasses import dataclass, field
from types import CodeType
from typing import TYPE_CHECKING, Any

import torch

from netc.errors import CompileError
from netc.ir.model import Graph, Loop, Value
from netc.ops import ITERABLES, REGISTRY, OpDef
from netc.ops.base import EagerUnsupported
from netc.ops.iterables import Stacker
from netc_runtime.beam import Beam
from netc_runtime.eager_loops import PKG_DIRS as _PKG_DIRS
from netc_runtime.eager_loops import (
    LoopIndex,
    LoopTag,
    SeqLen,
    _loops,
    caller_line,
    eager_range,
    empty_stack,
    end_step,
    list_made_in,
    run_loop,
    stacking_loop,
    user_span,
)
from netc_runtime.eager_params import throwaway_params

if TYPE_CHECKING:
    from netc_runtime.eager_network import Network


@dataclass
class _Run:
    net: Network
    lengths: dict[str, int]  # this sequence's length of each input dynamic dim
    loops: list[LoopTag] = field(default_factory=list)  # iterator loops currently running (innermost last)
    count: int = 0  # loop events so far: a loop's run starting or ending
    while_loops: dict[int, LoopTag] = field(default_factory=dict)  # `while True` runs by their `seq`
    in_frame_order: list[list] = field(default_factory=list)  # see `eager_loops._frame_order`
    zipped: dict[tuple[int, str, bool], LoopTag] = field(default_factory=dict)  # see `_iterate`
    losses: dict[str, ETensor] = field(default_factory=dict)
    searching: bool = False  # a beam search: `choice` runs one, the targets are absent
    # searching: the dynamic dims only the absent targets have (a value over one, made before the
    # search gives the dim its steps, is computed from a target: a computed `choice` target)
    target_dims: frozenset[str] = frozenset()
    seq: int = 0  # the sequence's index in the batch (a sampling search's draws depend on it)
    beam: Beam | None = None  # made by the first `choice` when searching
    search_loop: LoopTag | None = None  # searching: the choice loop's run (known at its first `end`)
    choice_step: int = 0  # training: which frame of its target the step's choices give (plus one)
    chose: bool = False  # whether this step made a choice already (a later one extends its hypotheses)
    choice_loop: LoopTag | None = None  # training: the run of the loop with `choice` (a `range` loop)
    target_len: int = 0  # training: the length of that target

    def check_target_covered(self) -> None:
        """Training, a loop with `choice` runs over all of its target (as RETURNN and torch do);
        the Python loop stopping at its bound first would silently cut it."""
        if self.target_len:
            raise ValueError(
                f"the loop with `choice` stopped after {self.choice_step} of its target's "
                f"{self.target_len} frames: its bound must cover the targets"
            )

    def align(self, args: list[ETensor], version: int | None = None) -> tuple[list[ETensor], int]:
        """Searching: every value with rows of the hypotheses of `version` (default: the newest
        version among `args`)."""
        version = max((a.version for a in args), default=0) if version is None else version
        if self.beam is None or version == 0:
            return args, 0
        out = []
        for a in args:
            if a.version < version and "batch" in a.dims:  # batch is the first dim
                rows = self.beam.rows_from(a.version, version)
                a = ETensor(a.data.index_select(0, rows), a.dims, a.frames, a.sparse_dim, version, a.serial)
            out.append(a)
        return out, version

    def search_axis(self) -> str:
        """The axis of the loop with `choice`."""
        return next(n.axis for n in self.graph().body if isinstance(n, Loop) and n.target is not None)

    def beam_bool(self, cond: ETensor) -> bool:
        """An `if` on a value with a row per hypothesis (see `ETensor.__bool__`)."""
        assert self.beam is not None
        (cond,), _ = self.align([cond], self.beam.version)
        rows = cond.data.reshape(-1).to(torch.bool)
        if self.search_loop is not None and self.search_loop.finished:  # after the search: its best decides
            return bool(rows[self.beam.best()[0]])
        if bool(rows.all()) or not bool(rows.any()):
            return bool(rows[0])
        raise CompileError(
            user_span(),
            "eager mode runs one branch of an `if` on a tensor, and the hypotheses of this beam search "
            "disagree on it; select with `where(cond, a, b)` in the searched loop instead",
        )

    def tag(self, axis: str, backward: bool) -> LoopTag:
        self.count += 1
        return LoopTag(axis, backward, self.count)

    def graph(self) -> Graph:
        """The loops as written: a `choice` loop as a search runs it (over its target's dim)."""
        return self.net.loops_graph

    def frames(self) -> tuple[LoopTag, ...]:
        """A new value's loops: the iterator loops running while it is made."""
        return tuple(self.loops)


_current: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("netc_eager_run", default=None)


def _run() -> _Run:
    r = _current.get()
    if r is None:
        raise RuntimeError("netc ops run eagerly only inside a call of a @network function")
    return r


class ETensor:
    """An eager tensor: torch data with named dims (canonical order), plus the loop axes
    it was computed in (so that a list of per-step values knows its stacking axis)."""

    searching: bool | None = None  # `searching()`'s value: the network decides it (`_apply`'s `where`)

    def __init__(
        self,
        data: torch.Tensor,
        dims: tuple[str, ...],
        frames: tuple[LoopTag, ...] = (),
        sparse_dim: str | None = None,
        version: int = 0,  # searching: whose hypotheses its rows are (see netc_runtime.beam)
        serial: int | None = None,  # the loop events before it was made (see `eager_loops`)
    ):
        self.data, self.dims, self.frames, self.sparse_dim = data, tuple(dims), frames, sparse_dim
        self.version = version
        run = _current.get()
        self.serial = serial if serial is not None else run.count if run is not None else 0
        assert data.dim() == len(self.dims), (data.shape, dims)

    def __repr__(self) -> str:
        return f"ETensor[{', '.join(self.dims)}]({self.data})"

    def _dyn(self) -> str:
        dt = _run().net.dims
        dyn = dt.dynamic(self.dims)
        if len(dyn) != 1:
            raise TypeError(f"needs exactly one dynamic dim, got [{', '.join(self.dims)}]")
        return dyn[0]

    @property
    def max_seq_len(self) -> SeqLen:
        dim = self._dyn()
        return SeqLen(self.data.shape[self.dims.index(dim)], dim)

    def _frame(self, axis: str, i: int) -> ETensor:
        pos = self.dims.index(axis)
        frame = self.data.select(pos, i)
        return ETensor(frame, self.dims[:pos] + self.dims[pos + 1 :], _run().frames(), self.sparse_dim)

    def __getitem__(self, t: int) -> ETensor:
        """`x[t]` in `for t in range(y.max_seq_len)`: the frame along the loop's axis."""
        return self._frame(t.axis if isinstance(t, LoopIndex) else self._dyn(), t)

    def __iter__(self):
        return _iterate(self, self._dyn())

    def __reversed__(self):
        return _iterate(self, self._dyn(), backward=True)

    def _binary(self, name: str, other: Any, left: bool) -> ETensor:
        if isinstance(other, Absent):  # searching: a value computed from a target does not exist
            return ABSENT
        if isinstance(other, list):
            other = stack_list(other)
        if isinstance(other, ETensor):
            args = [other, self] if left else [self, other]
            return _apply(REGISTRY[name], args, {})
        return _apply(REGISTRY[name], [self], {"scalar": other, "scalar_left": left})

    def __add__(self, o):
        return self._binary("add", o, False)

    def __radd__(self, o):
        return self._binary("add", o, True)

    def __sub__(self, o):
        return self._binary("sub", o, False)

    def __rsub__(self, o):
        return self._binary("sub", o, True)

    def __mul__(self, o):
        return self._binary("mul", o, False)

    def __rmul__(self, o):
        return self._binary("mul", o, True)

    def __truediv__(self, o):
        return self._binary("div", o, False)

    def __rtruediv__(self, o):
        return self._binary("div", o, True)

    def __floordiv__(self, o):
        return self._binary("floordiv", o, False)

    def __rfloordiv__(self, o):
        return self._binary("floordiv", o, True)

    def __mod__(self, o):
        return self._binary("mod", o, False)

    def __rmod__(self, o):
        return self._binary("mod", o, True)

    def __bool__(self) -> bool:
        """`if cond:` in eager mode: one sequence at a time, so one bool. Searching, a value has a
        row per hypothesis (`batch`): after the search, the best one's; in its loop, the one all
        hypotheses agree on (Python runs one branch)."""
        if set(self.dims) <= {"batch"} and self.data.numel() > 1 and _run().beam is not None:
            return _run().beam_bool(self)
        if self.data.numel() != 1:
            raise TypeError(f"`if` on a tensor needs one value per sequence, got dims [{', '.join(self.dims)}]")
        return bool(self.data.item())

    def __neg__(self):
        return _apply(REGISTRY["neg"], [self], {})

    def __abs__(self):
        return _apply(REGISTRY["abs"], [self], {})

    def __round__(self, ndigits=None):
        if ndigits is not None:
            raise TypeError("round(x) of a tensor takes no digits")
        return _apply(REGISTRY["round"], [self], {})

    def __pow__(self, k):
        return _apply(REGISTRY["pow"], [self], {"scalar": k, "scalar_left": False})

    def __lt__(self, o):
        return self._binary("lt", o, False)

    def __le__(self, o):
        return self._binary("le", o, False)

    def __gt__(self, o):
        return self._binary("gt", o, False)

    def __ge__(self, o):
        return self._binary("ge", o, False)

    def __eq__(self, o):  # type: ignore[override]  # elementwise, as in torch
        return self._binary("eq", o, False)

    def __ne__(self, o):  # type: ignore[override]
        return self._binary("ne", o, False)

    __hash__ = object.__hash__


class _Unstacked:
    """`unstack(x, axis=...)`: iterable forwards, and backwards with `reversed`."""

    def __init__(self, x: ETensor, axis: str):
        self.x, self.axis = x, axis

    def __iter__(self):
        return _iterate(self.x, self.axis)

    def __reversed__(self):
        return _iterate(self.x, self.axis, backward=True)


def _iterate(x: ETensor, axis: str, backward: bool = False):
    """Frames along `axis`; values made meanwhile are tagged with this run of the loop."""
    run = _run()
    n = x.data.shape[x.dims.index(axis)]
    steps = reversed(range(n)) if backward else range(n)
    frames = (x._frame(axis, i) for i in steps)
    key = (caller_line(), axis, backward)
    first = run.zipped.get(key)
    if first is not None and first.steps == 0 and not first.finished:
        # `zip(a, b)`: one loop, whose run the first iterable's iterator counts and ends (two runs
        # of one axis would tag the loop's values twice, one run never ending, as zip stops early)
        return frames
    tag = run.zipped[key] = run.tag(axis, backward)
    return run_loop(run, tag, frames)


_UNSET = object()


def _range(*args):
    """`range` in the model's code while it runs eagerly (see `eager_loops`)."""
    return eager_range(_current.get(), args)


def unstack(x: ETensor, axis) -> Any:
    return _Unstacked(stack_list(x) if isinstance(x, list) else x, axis.name)


def _lists_made_in(items: list, outer: LoopTag | None) -> LoopTag | None:
    """The loop run a list of lists was appended in: the one most of them were made in (each
    inner loop runs afresh per step; a `while True` run is known from its first `end`, so the
    first step's list alone tells only the inner loop's run)."""
    tags = [list_made_in(i, _run(), outer) for i in items if isinstance(i, list)]
    return max(tags, key=lambda t: sum(u is t for u in tags), default=None)


def stack_list(items: list, output: str | None = None, outer: LoopTag | None = None) -> ETensor:
    """A list appended to in a loop, as the stacked tensor it is in the compiled targets (the
    returned `output`, if it is one; `outer`: the loop of the list this one was appended to)."""
    if not items:  # its loop stacked nothing for this sequence: the graph's stack tells the dims
        return _empty_stack(items)
    in_frame_order = any(items is done for done in _run().in_frame_order)
    listed = items
    # an inner loop's list appended in the outer loop's step: its stack, made in that step
    # (read after both loops: the outer one, finished too, is the one its items were first made in)
    appended_in = _lists_made_in(items, outer) if any(isinstance(i, list) for i in items) else None
    items = [stack_list(i, outer=appended_in) if isinstance(i, list) else i for i in items]
    if not all(isinstance(i, ETensor) for i in items):
        raise TypeError("only a non-empty list of tensors appended in a loop can be used as a tensor")
    run = _run()
    if run.target_len and _made_in_finished(items, run.choice_loop):  # the choice loop's, which stopped early
        run.check_target_covered()
    if len({i.dims for i in items}) != 1:
        raise TypeError(f"list items have different dims {[i.dims for i in items]}")
    axis, backward, tag = stacking_loop(items, run, output, listed, outer)
    # the loops its items were made in, outside the one stacked over: the stack belongs to their
    # step also when read after them (an inner loop's list appended to an outer loop's list)
    made_in = list(items[0].frames[: items[0].frames.index(tag)] if tag in items[0].frames else items[0].frames)
    for i in items[1:]:
        while made_in and tuple(made_in) != i.frames[: len(made_in)]:
            made_in.pop()
    frames = max((tuple(made_in), run.frames()), key=len)
    if backward and not in_frame_order:  # appended backwards: stacked in frame order, as the targets do
        items = items[::-1]
    items, version = run.align(items)  # searching: each step's frames of the final hypotheses
    stacker = tag.stacker if tag is not None else _stacker(run, axis)
    own = stacker([i.data for i in items], items[0].dims, run.net.dims.canonical) if stacker else None
    if own is not None:  # as its loop kind stacks (a chunked loop's chunks back over the dim chunked)
        return ETensor(own[0], own[1], frames, items[0].sparse_dim, version)
    out_dims = run.net.dims.canonical((*items[0].dims, axis))
    data = torch.stack([i.data for i in items], dim=out_dims.index(axis))
    return ETensor(data, out_dims, frames, items[0].sparse_dim, version)


def _stacker(run: _Run, axis: str) -> Stacker | None:
    """How a list appended in the graph's loop over `axis` stacks, where its kind says."""
    for n in _loops(run.graph()):
        for d in ITERABLES.values() if n.axis == axis else ():
            if (s := d.eager_stacker(n)) is not None:
                return s
    return None


def _made_in_finished(items: list, loop: LoopTag | None) -> bool:
    """Whether `items` were made in the run `loop`, which has finished."""
    return loop is not None and loop.finished and any(loop in getattr(i, "frames", ()) for i in items)


def _empty_stack(items: list) -> ETensor:
    """A stack of no frames (`eager_loops.empty_stack`): its other dims' sizes are this sequence's."""
    run = _run()
    found = empty_stack(run, items)
    if found is None:
        raise CompileError(
            user_span(),
            "eager mode cannot use an empty list as a tensor (its loop stacked nothing for this "
            "sequence, and no stack of the compiled graph has its name); return the list as an output instead",
        )
    dims, axis, dtype, sparse_dim = found
    dt = run.net.dims
    shape = [1 if d == "batch" else 0 if d == axis else dt[d].size or run.lengths.get(d, 0) for d in dims]
    data = torch.zeros(shape, dtype={"float32": torch.float32, "bool": torch.bool}.get(dtype, torch.int64))
    return ETensor(data, dims, run.frames(), sparse_dim)


class _Ctx:
    def __init__(self, params: dict[str, torch.Tensor] | None = None, rows: int = 1):
        self.params = params or {}
        self.training = _run().net.training
        self.searching = _run().searching
        self.rows = rows  # the batch: one sequence, or its hypotheses when searching

    def size(self, dim: str) -> int:
        d = _run().net.dims[dim]
        if d.kind == "batch":
            return self.rows
        if d.size is None:  # this sequence's own length (one sequence at a time)
            run = _run()
            if dim not in run.lengths:
                searched = run.search_loop
                if searched is not None and searched.finished and dim == run.search_axis():
                    # after a search, its target's dim (no target is given): the steps it ran, as
                    # long as its stacks (work there is no search result, yet eager mode runs it)
                    return searched.steps
                raise TypeError(f"no length of dim {dim} known here")
            return run.lengths[dim]
        return d.size

    def param(self, role: str) -> torch.Tensor:
        return self.params[role]


def _attr(v: Any) -> Any:
    from netc.dsl import Dim

    if isinstance(v, Dim):
        return v.name
    if isinstance(v, (list, tuple)):
        return [_attr(x) for x in v]
    return v


def _apply(opdef: OpDef, args: list[ETensor], attrs: dict, params: dict | None = None):
    run = _run()
    if opdef.name == "where" and len(args) == 3 and isinstance(args[0], ETensor) and args[0].searching is not None:
        # `where(searching(), a, b)` is the operand it selects, as each compiled network decides it:
        # the other may read what only the other network has (a target's frame, `y[i]`)
        taken = args[1] if args[0].searching else args[2]
        args = [args[0], taken, taken]
    if any(isinstance(a, Absent) for a in args):  # searching: what needs a target does not exist
        return ABSENT
    args, version = run.align(args)
    vals = [Value(id=0, dims=a.dims, dtype=_dtype(a.data), sparse_dim=a.sparse_dim) for a in args]
    outs = opdef.infer(run.net.dims, vals, attrs)
    if run.target_dims and run.search_loop is None and any(d in run.target_dims for o in outs for d in o.dims):
        return ABSENT  # over a target's dim before the search made it: a computed target's
    rows = max((a.data.shape[0] for a in args if "batch" in a.dims), default=1)  # batch is the first dim
    try:
        res = opdef.eager(_Ctx(params, rows), args, attrs, outs)
    except EagerUnsupported as e:
        raise CompileError(user_span(), str(e)) from None
    for d in opdef.makes_dims(attrs):  # this sequence's length of a dim the op made (`max_pool`)
        first = res[0] if isinstance(res, tuple) else res
        run.lengths[d] = first.shape[outs[0].dims.index(d)]
    run.lengths.update(opdef.eager_lengths(attrs, outs, res))  # a grown state's frames so far
    frames = run.frames()
    if isinstance(res, tuple):
        return tuple(ETensor(r, o.dims, frames, o.sparse_dim, version) for r, o in zip(res, outs))
    out = ETensor(res, outs[0].dims, frames, outs[0].sparse_dim, version)
    if opdef.name == "searching":
        out.searching = run.searching
    return out


def _dtype(t: torch.Tensor) -> str:
    return {torch.float32: "float32", torch.bool: "bool"}.get(t.dtype, "int32")


def call_op(name: str, args: tuple, kwargs: dict):
    from netc.ops import BY_FN_NAME

    opdef = BY_FN_NAME[name]
    tensors, attrs = opdef.bind(args, kwargs)
    tensors = [stack_list(t) if isinstance(t, list) else t for t in tensors]
    return _apply(opdef, tensors, {k: _attr(v) for k, v in attrs.items()})


def mark_as_loss(value, name: str) -> None:
    run = _run()
    if isinstance(value, list):
        value = stack_list(value)
    if name in run.losses:
        raise ValueError(f"loss {name!r} is marked twice")
    if not isinstance(value, Absent):  # a loss needs the targets: none when searching
        run.losses[name] = value


def end(cond) -> bool:
    run = _run()
    ended = _ends(run, cond)
    tag = end_step(run, ended)
    if run.beam is not None and run.search_loop is None and tag is not None and tag.axis == run.search_axis():
        run.search_loop = tag  # (not a loop with `end` nested in it)
    return ended


def _ends(run: _Run, cond) -> bool:
    run.chose = False  # the next step's first choice starts it
    if run.beam is not None:  # searching: each hypothesis ends on its own; stop when all have
        # (rows of the current hypotheses: `cond` may be of an older version, made before the last choice)
        (cond,), _ = run.align([cond], run.beam.version)
        return run.beam.end(cond.data.reshape(-1))
    if run.target_len:  # training a loop with `choice`: it runs over the target's frames
        if run.choice_step < run.target_len:
            return False
        run.choice_step = run.target_len = 0
        return True
    return bool(cond)


def choice(
    logits,
    target,
    beam: int,
    length_normalization: bool = True,
    input_type: str = "logits",
    sample: bool = False,
    seed: int = 0,
) -> ETensor:
    """Training: the target's label at this step. Searching: one step of the beam search."""
    run = _run()
    if not run.searching:
        run.choice_loop = run.loops[-1] if run.loops else None
        axis = run.net.dims.dynamic(target.dims)[0]
        if not run.chose:  # the loop runs over the first choice's target (all are over one dim)
            run.target_len = target.data.shape[target.dims.index(axis)]
            run.choice_step += 1
        run.chose = True
        return target._frame(axis, run.choice_step - 1)
    if run.beam is None:
        run.beam = Beam(beam, length_normalization, sample, seed, run.seq)
    first, run.chose = not run.chose, True
    # rows of the current hypotheses: scores made before the last choice (not reading its label,
    # e.g. from a state the step updates after them) are of an older version, a row per hypothesis it had
    (logits,), _ = run.align([stack_list(logits) if isinstance(logits, list) else logits], run.beam.version)
    logp = logits.data  # "log_prob": as the model computed them (the compiler checked the name)
    # the class dim: the scores' other dim (the compiler checked it is the target's, which a
    # computed target, absent here, does not tell)
    classes = next(d for d in logits.dims if d != "batch")
    if input_type == "logits":
        logp = torch.log_softmax(logp, dim=logits.dims.index(classes))
    elif input_type == "prob":
        logp = torch.log(logp)
    labels = run.beam.choose(logp, first, length_normalization)
    return ETensor(labels, ("batch",), run.frames(), classes, run.beam.version)


class Absent:
    """A target when searching, and whatever is computed from one: it does not exist."""

    def __init__(self, sparse_dim: str | None = None):
        self.sparse_dim = sparse_dim

    def __getattr__(self, name: str):
        raise TypeError(f"a search has no targets: `{name}` of a value computed from one")

    def _self(self, *_args):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _self
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _self
    __pow__ = __abs__ = __round__ = _self  # ETensor's other operators (a focal loss's `(1 - p) ** 2.0`)
    __getitem__ = _self  # a frame of a target (`y[i]` by a decoder's step)
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __neg__ = _self  # type: ignore[assignment]
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("a search has no targets: an `if` on a value computed from one")


ABSENT = Absent()


@functools.lru_cache(maxsize=256)
def _positions(code: CodeType) -> tuple[tuple[int | None, int | None], ...]:
    """(line, col) of each instruction of `code`: listed once per function, not once per call
    (a 96-layer network's function has tens of thousands; listing them per module was minutes)."""
    return tuple((pos[0], pos[2]) for pos in code.co_positions())


def _call_path(net: Network) -> tuple[tuple[int, int], ...]:
    """(line, col) of each user call site from the network function down to this constructor."""
    path = []
    f = inspect.currentframe()
    while f is not None:
        code = f.f_code
        if not os.path.abspath(code.co_filename).startswith(_PKG_DIRS):
            path.append(_positions(code)[f.f_lasti // 2])
        if code is net.fn.__code__:
            return tuple(reversed(path))
        f = f.f_back
    raise RuntimeError("module constructed outside the @network function")


class OpModule:
    """Eager side of a parameterised op such as `Linear(hidden)`: parameters by call path."""

    def __init__(self, name: str, args: tuple, kwargs: dict):
        from netc.ops import BY_FN_NAME

        self.opdef = BY_FN_NAME[name]
        run = _run()
        # `weight=emb.weight`: roles that are another module's parameter (the compiler checked them)
        self.tied: dict[str, ParamRef] = {role: kwargs.pop(k) for k, role in self.opdef.weights.items() if k in kwargs}
        bound = inspect.signature(self.opdef.ctor).bind(*args, **kwargs)
        bound.apply_defaults()
        self.attrs = {k: _attr(v) for k, v in bound.arguments.items()}
        # none when the module's result is never read: the compiler dropped its parameters
        self.params: dict[str, torch.Tensor] | None = run.net.params_by_path.get(_call_path(run.net))
        self.dims: dict[str, tuple[str, ...]] = {}  # each parameter's dims, from the first call

    def __call__(self, *args, **kwargs) -> ETensor | tuple[ETensor, ...]:
        tensors, call_attrs = self.opdef.module_call(args, kwargs)
        xs = [stack_list(x) if isinstance(x, list) else x for x in tensors]
        attrs = {**self.attrs, **{k: _attr(v) for k, v in call_attrs.items()}}
        if any(isinstance(x, Absent) for x in xs):  # searching: what needs a target does not exist
            return ABSENT
        if self.params is None or not self.dims:
            vals = [Value(id=0, dims=x.dims, dtype=_dtype(x.data), sparse_dim=x.sparse_dim) for x in xs]
            self.dims = self.opdef.params(_run().net.dims, vals, attrs)
            if self.params is None:
                self.params = throwaway_params(self.opdef, _run().net.dims, vals, attrs)
        params = self.params
        if self.tied:  # the owner's tensor itself (its gradient is the owner's), transposed as the dims say
            params = dict(params)
            for role, ref in self.tied.items():
                t, dims = ref.module.param(ref.role)
                want = self.dims[role]
                same = dims == want if dims else tuple(t.shape) == tuple(_run().net.dims[d].size for d in want)
                params[role] = t if same else t.t()
        return _apply(self.opdef, xs, attrs, params)

    def param(self, role: str) -> tuple[torch.Tensor, tuple[str, ...]]:
        """The tensor the module's parameter `role` is and its dims (another module's if tied)."""
        if role in self.tied:
            ref = self.tied[role]
            return ref.module.param(ref.role)
        assert self.params is not None, "a tied parameter's module is called first (the compiler checks it)"
        # no dims when its calls so far were on what a search does not have (a target): by shape
        return self.params[role], self.dims.get(role, ())


@dataclass(frozen=True)
class ParamRef:
    """`emb.weight` in eager mode: one parameter of a module, to pass as another's `weight=`."""

    module: OpModule
    role: str
