"""Turning a Python `for` statement into a `Loop` region.

Every name the body assigns that holds a tensor before the loop becomes a carried
value (its block argument is the previous step's value); the rec-state pass later drops
carries whose previous value is never read. Names assigned in the body are bound after
the loop to their last-frame value, and lists appended to become stacked tensors.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from netc.ir.dims import DimError, DimTable
from netc.ir.model import Loop, LoopCarry, LoopInvariant, LoopLast, LoopSeq, LoopStack, Value
from netc.ir.uses import count_uses_in_loop
from netc.ops import REGISTRY
from netc.parser import values as V
from netc.parser.choice import trace_choice
from netc.parser.iterables import IterableSpec, OpenLoop, all_rules
from netc.parser.symbols import netc_callee

if TYPE_CHECKING:
    from netc.parser.tracer import Tracer


@dataclass(eq=False)
class _LoopCtx:
    stmt: ast.For | ast.While
    loop: Loop
    block: V.Block
    env: dict[str, Any]
    assigned: dict[str, ast.AST]
    serial: int  # when the loop opened, on the tracer's clock
    appends: dict[int, tuple[V.PyList, V.TV, ast.AST]] = field(default_factory=dict)
    index: V.LoopIndex | None = None
    tensor_if_depth: int = 0
    end: ast.If | None = None  # the `if end(cond): break` statement
    past_end: bool = False  # the body is being read after that statement
    after_end: dict[str, ast.AST] = field(default_factory=dict)  # names assigned after it
    before: dict[str, Any] = field(default_factory=dict)  # their values before the loop (if any)
    at_break: dict[str, Any] = field(default_factory=dict)  # their values at the `break`
    cond: V.TV | None = None  # the `end` condition
    target_names: set[str] = field(default_factory=set)
    python_before: dict[str, Any] = field(default_factory=dict)
    append_sides: set[bool] = field(default_factory=set)  # appends before (True) / after the end
    target: tuple[V.TV, str] | None = None  # the first `choice`'s target labels (outer) and their dim
    beam: int = 0  # its beam, which every choice of the loop shares
    sample: bool = False  # whether it samples (then it is the loop's one choice)
    kind: OpenLoop | None = None  # a loop over a loop kind's iterable (`netc.parser.iterables`)
    step_reads: list[tuple[str, ast.AST]] = field(default_factory=list)  # `x[i]` by the step: (dim, node)
    chosen_targets: set[int] = field(default_factory=set)  # the outer values its choices take as targets

    def stacks_into(self, lst: V.PyList) -> bool:
        """Whether `lst` is one of the empty lists bound when the loop started: appending to it
        in the body stacks (a list made in the body is a plain Python list)."""
        return lst.serial < self.serial and not lst.items and bool(lst.bound_in(self.env))


def assigned_names(stmts: list[ast.stmt]) -> dict[str, ast.AST]:
    """Names a loop body binds (first binding node each, in source order), including nested
    blocks. An explicit stack: this runs while the tracer is already deep in the stack."""
    found: dict[str, ast.AST] = {}
    todo = list(reversed(stmts))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Assign):
            for t in node.targets:
                _bound_names(t, found)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            _bound_names(node.target, found)
        todo.extend(reversed([c for c in ast.iter_child_nodes(node) if isinstance(c, (ast.stmt, ast.excepthandler))]))
    return found


def _reads_class_dim(dims: DimTable, loop: Loop, value: int, sparse_dim: str | None) -> bool:
    """Whether an op of `loop`'s body (or of a loop nested in it) reading `value` would not be
    what it is if `value` had class dim `sparse_dim`: its dim rule fails or gives another."""
    table = {v.id: v for v in loop.block_args()}
    ids = {value}
    todo = list(reversed(loop.body))
    while todo:
        n = todo.pop()
        if isinstance(n, Loop):  # the value as a nested loop's block argument: the same question
            table.update((v.id, v) for v in n.block_args())
            ids |= {i.inner.id for i in n.invariants if i.outer in ids}
            ids |= {c.inner.id for c in n.carries if c.init in ids}
            todo.extend(reversed(n.body))
            continue
        table.update((v.id, v) for v in n.outs)
        if ids.isdisjoint(n.args):
            continue
        vals = [replace(table[a], sparse_dim=sparse_dim) if a in ids else table[a] for a in n.args]
        try:
            outs = REGISTRY[n.op].infer(dims, vals, n.attrs)
        except DimError:
            return True
        if [o.sparse_dim for o in outs] != [o.sparse_dim for o in n.outs]:
            return True
    return False


def _labels(v: Value) -> str:
    return f"labels over `{v.sparse_dim}`" if v.sparse_dim else f"{v.dtype} without a class dim"


def _bound_names(t: ast.AST, found: dict[str, ast.AST]) -> None:
    # a function of its own, not a closure calling itself (a reference cycle, freed only by
    # the cyclic collector)
    if isinstance(t, ast.Name):
        found.setdefault(t.id, t)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for el in t.elts:
            _bound_names(el, found)
    elif isinstance(t, ast.Starred):
        _bound_names(t.value, found)


class LoopBuilder:
    def __init__(self, tracer: Tracer):
        self.t = tracer
        self.active: list[_LoopCtx] = []

    # --- values crossing region boundaries ---------------------------------------------

    def capture(self, tv: V.TV, block: V.Block, node: ast.AST) -> V.TV:
        if tv.block is block:
            return tv
        if block.region is not None:
            raise self.t.error(
                node,
                f"{block.region} reads a value from outside it (`{tv.value.name or 'a tensor'}`): "
                "it may read only its arguments and parameters",
            )
        if block.parent is None:
            raise self.t.error(
                node,
                "a value computed inside a loop is used outside it; read it after the loop through a variable (last frame) or a list (stacked)",
            )
        outer = self.capture(tv, block.parent, node)
        got = block.captured.get(outer.value.id)
        if got is None:
            v = outer.value
            inner = self.t.new_value(v.dims, v.dtype, name=v.name, sparse_dim=v.sparse_dim)
            block.loop.invariants.append(LoopInvariant(outer=v.id, inner=inner))
            got = block.captured[v.id] = V.TV(inner, block)
        return got

    # --- iterables -----------------------------------------------------------------------

    def iter_builtin(self, name: str, node: ast.Call) -> Any:
        args, kwargs = self.t.call_args(node)
        if kwargs:
            raise self.t.error(node, f"`{name}` takes no keyword arguments here")
        if name == "range":
            if 1 <= len(args) <= 3 and all(type(a) is int for a in args) and not (len(args) == 1 and args[0] > 0):
                return range(*args)  # unrolled (`for k in range(1, 4)`), unless a loop with `end`
            ok = len(args) == 1 and (isinstance(args[0], V.SeqLen) or (isinstance(args[0], int) and args[0] > 0))
            if not ok:
                raise self.t.error(node, "loops over `range` need `range(x.max_seq_len)` (each sequence's own length)")
            return V.RangeSpec(args[0])
        if name == "zip":
            if len(args) < 2:
                raise self.t.error(node, "zip needs at least two sequences")
            return V.ZipSpec(tuple(args))
        if len(args) != 1:
            raise self.t.error(node, "reversed takes one sequence")
        if isinstance(args[0], V.RangeSpec):
            raise self.t.error(
                node, "`reversed(range(...))` would index frames by hand; loop over `reversed(x)` instead"
            )
        if not isinstance(args[0], (V.TV, V.UnstackSpec)):
            raise self.t.error(node, "`reversed` takes a tensor or `unstack(x, axis=...)`")
        self._seq(args[0], node)
        return V.ReversedSpec(args[0])

    def unstack(self, node: ast.Call) -> V.UnstackSpec:
        args, kwargs = self.t.call_args(node)
        try:
            x, axis = _unstack_args(*args, **kwargs)
        except TypeError:
            raise self.t.error(node, "use unstack(x, axis=dim)") from None
        if not isinstance(x, V.TV) or not isinstance(axis, V.DimRef):
            raise self.t.error(node, "use unstack(x, axis=dim) with a tensor and a dim")
        if axis.name not in x.dims or self.t.dims[axis.name].kind != "dynamic":
            raise self.t.error(node, f"`{axis.name}` is not a dynamic dim of the tensor [{', '.join(x.dims)}]")
        return V.UnstackSpec(x, axis.name)

    def _seq(self, it: Any, node: ast.AST) -> tuple[V.TV, str]:
        if isinstance(it, V.ReversedSpec):
            return self._seq(it.inner, node)
        if isinstance(it, V.UnstackSpec):
            return it.tensor, it.axis
        if isinstance(it, V.TV):
            dyn = self.t.dims.dynamic(it.dims)
            if len(dyn) != 1:
                what = (
                    "no dynamic dim"
                    if not dyn
                    else f"several dynamic dims ({', '.join(dyn)}); use unstack(x, axis=...)"
                )
                raise self.t.error(node, f"cannot loop over a tensor with {what}")
            return it, dyn[0]
        raise self.t.error(
            node, "a loop iterates over a tensor, `unstack(x, axis=...)`, `zip(...)` or `range(x.max_seq_len)`"
        )

    # --- the loop ------------------------------------------------------------------------

    def for_loop(self, stmt: ast.For) -> None:
        t = self.t
        if stmt.orelse:
            raise t.error(t.else_clause(stmt), "`for ... else` is not supported")
        it = t.eval_expr(stmt.iter)
        end = _find_end(stmt.body, t)
        if isinstance(it, V.RangeSpec) and isinstance(it.bound, int) and end is None:
            it = range(it.bound)
        if isinstance(it, range):  # a static range: unrolled, as Python runs it
            if end is not None:
                raise t.error(end, "`if end(cond): break` needs `for t in range(n)` or `while True`")
            t.unrolled(stmt, it)
            return
        targets: list[tuple[ast.expr, V.TV]] = []
        seqs: list[tuple[V.TV, str, ast.AST]] = []
        kind: OpenLoop | None = None
        if isinstance(it, V.RangeSpec):
            # with `end` the loop makes its own dim (set when it closes): the bound only limits it
            axis = it.bound.dim if end is None and isinstance(it.bound, V.SeqLen) else ""
            if end is None and not (isinstance(it.bound, V.SeqLen) and it.bound.plain):
                raise t.error(
                    stmt.iter,
                    "a loop over `range(n)` steps over the frames of `x.max_seq_len`; other bounds "
                    "need `if end(cond): break` in the body",
                )
        elif end is not None:
            raise t.error(end, "`if end(cond): break` needs `for t in range(n)` or `while True`")
        elif isinstance(it, V.ZipSpec):
            if not isinstance(stmt.target, (ast.Tuple, ast.List)) or len(stmt.target.elts) != len(it.parts):
                raise t.error(stmt.target, f"zip of {len(it.parts)} sequences needs {len(it.parts)} loop variables")
            for el, part in zip(stmt.target.elts, it.parts):
                x, ax = self._seq(part, stmt.iter)
                seqs.append((x, ax, el))
            axes = {ax for _, ax, _ in seqs}
            if len(axes) != 1:
                raise t.error(stmt.iter, f"zip over different axes: {', '.join(sorted(axes))}")
            axis = seqs[0][1]
        elif isinstance(it, IterableSpec):  # a loop kind's iterable opens its loop
            kind, frames, axis = it.open(t, stmt.iter)
            seqs += [(f, axis, None) for f in frames]
        else:
            x, axis = self._seq(it, stmt.iter)
            seqs.append((x, axis, stmt.target))

        for rules in all_rules() if kind is None and axis else ():
            rules.check_loop(t, axis, stmt.iter)
        parts = it.parts if isinstance(it, V.ZipSpec) else (it,)
        backward = {isinstance(p, V.ReversedSpec) for p in parts}
        if len(backward) != 1:
            raise t.error(stmt.iter, "zip of reversed and forward sequences; reverse all of them or none")
        loop = Loop(axis=axis, span=t.span(stmt), reverse=backward.pop())
        if end is not None:
            self._bound(loop, it.bound, stmt.iter)
        target_names = set(_target_names(stmt.target))
        ctx = self._open(stmt, loop, target_names, end)
        body, env = ctx.block, ctx.env
        for x, _, target in seqs:
            ox = self.capture(x, body.parent, stmt.iter)
            frame = t.new_value(tuple(d for d in ox.dims if d != axis), ox.value.dtype, sparse_dim=ox.value.sparse_dim)
            loop.seqs.append(LoopSeq(outer=ox.value.id, inner=frame))
            targets.append((target, V.TV(frame, body)))
        if kind is not None:
            ctx.kind = kind
            kind.first(t, body, [f for _, f in targets], stmt)
        elif isinstance(it, V.RangeSpec):
            if not isinstance(stmt.target, ast.Name):
                raise t.error(stmt.target, "`for t in range(...)` binds one name")
            # with `end`, the step: it reads the frames training runs over (`_step_axis`)
            ctx.index = V.LoopIndex(block=body, axis=axis if end is None else "", step=end is not None)
            env[stmt.target.id] = ctx.index
        else:
            for target, frame in targets:
                t.assign(target, frame)
        self._run(ctx, stmt.body)

    def while_loop(self, stmt: ast.While) -> None:
        t = self.t
        end = _find_end(stmt.body, t)
        if not (isinstance(stmt.test, ast.Constant) and stmt.test.value is True) or end is None:
            raise t.error(stmt, "`while` loops are `while True:` with `if end(cond): break` in the body")
        if stmt.orelse:
            raise t.error(t.else_clause(stmt), "`while ... else` is not supported")
        loop = Loop(axis="", span=t.span(stmt))
        self._run(self._open(stmt, loop, set(), end), stmt.body)

    def _bound(self, loop: Loop, bound: Any, node: ast.AST) -> None:
        """The per-sequence step limit of a loop with `end`: an int32 [batch] value before the loop."""
        t = self.t
        if isinstance(bound, int):
            loop.max_steps = bound
            return
        lens = t.emit(REGISTRY["seq_lens"], [bound.tensor], {"axis": bound.dim}, node)[0]
        if bound.scale != 1:
            lens = t.emit(REGISTRY["mul"], [lens], {"scalar": bound.scale, "scalar_left": True}, node)[0]
        if bound.offset:
            lens = t.emit(REGISTRY["add"], [lens], {"scalar": bound.offset, "scalar_left": False}, node)[0]
        if bound.div != 1:
            lens = t.emit(REGISTRY["floordiv"], [lens], {"scalar": bound.div}, node)[0]
        loop.bound = lens.value.id

    def _open(self, stmt, loop: Loop, target_names: set[str], end: ast.If | None) -> _LoopCtx:
        """Start the loop's body block: every name it assigns that holds a tensor becomes a carry."""
        t = self.t
        outer, env = t.block, t.env
        outer.nodes.append(loop)
        body = V.Block(nodes=loop.body, loop=loop, parent=outer)
        assigned = assigned_names(stmt.body)
        after_end = assigned_names(stmt.body[stmt.body.index(end) + 1 :]) if end is not None else {}
        before = {n: env[n] for n in after_end if n in env}
        for name in assigned:
            if name in env and isinstance(env[name], V.TV) and name not in target_names:
                init = self.capture(env[name], outer, assigned[name])
                inner = t.new_value(init.dims, init.value.dtype, name=name, sparse_dim=init.value.sparse_dim)
                span = t.span(assigned[name])
                loop.carries.append(LoopCarry(name=name, init=init.value.id, inner=inner, next=-1, span=span))
                env[name] = V.TV(inner, body)
        python_bound = {n for n in assigned if n in env and not isinstance(env[n], V.TV) and n not in target_names}
        return _LoopCtx(
            stmt=stmt,
            loop=loop,
            block=body,
            env=env,
            assigned=assigned,
            serial=t.tick(),
            tensor_if_depth=t.tensor_if_depth,
            end=end,
            after_end=after_end,
            before=before,
            target_names=target_names,
            python_before={n: env.get(n) for n in python_bound},
        )

    def _run(self, ctx: _LoopCtx, stmts) -> None:
        t = self.t
        outer = t.block
        self.active.append(ctx)
        t.block = ctx.block
        try:
            for s in stmts:
                if s is ctx.end:
                    self._end(ctx, s)
                    continue
                if isinstance(s, (ast.Break, ast.Continue)):
                    raise t.error(s, "`break`/`continue` are only supported as `if end(cond): break`")
                t.stmt(s)
        except V.Return as r:  # it would leave the loop in its first step
            raise t.error(r.node, "`return` inside a loop body is not supported; return after the loop") from None
        finally:
            t.block = outer
            self.active.pop()
        for name, before in ctx.python_before.items():
            if ctx.env.get(name) is not before:
                raise t.error(
                    ctx.assigned[name],
                    f"`{name}` holds a Python value before the loop and is reassigned in the body; loop state must be tensors",
                )
        self._close(ctx, outer, ctx.target_names)

    def _end(self, ctx: _LoopCtx, node: ast.If) -> None:
        cond = self.t.eval_expr(node.test.args[0])
        if not isinstance(cond, V.TV) or cond.value.dtype != "bool" or not set(cond.dims) <= {"batch"}:
            got = f"{cond.value.dtype}[{', '.join(cond.dims)}]" if isinstance(cond, V.TV) else type(cond).__name__
            raise self.t.error(node.test, f"end(cond) needs one bool per sequence (dims within [batch]), got {got}")
        ctx.cond = self.capture(cond, ctx.block, node)
        ctx.loop.end = ctx.cond.value.id
        ctx.at_break = {n: ctx.env.get(n) for n in ctx.after_end}
        ctx.past_end = True

    def _close(self, ctx: _LoopCtx, outer: V.Block, target_names: set[str]) -> None:
        t, loop, body, env = self.t, ctx.loop, ctx.block, ctx.env
        carried = {c.name for c in loop.carries}
        final = {n: env.get(n) for n in ctx.after_end}  # before the carries' names are rebound
        for axis, node in ctx.step_reads:  # `x[i]` read before the choice that tells training's dim
            if ctx.target is None:
                raise t.error(
                    node,
                    "`x[i]` by the step of a loop with `end` reads the frame training is at: only a loop "
                    "with `choice` runs over a target's frames in training",
                )
            if axis != ctx.target[1]:
                raise t.error(
                    node,
                    f"`x[i]` reads a sequence over `{axis}`; this loop's training runs over `{ctx.target[1]}` "
                    "(its `choice`'s target's dim)",
                )
        if ctx.target is not None:  # the target's frames in training, a search's steps otherwise
            if not loop.include_eos:
                raise t.error(ctx.end, "in a loop with `choice`, append before `if end(...)`: the ending label counts")
            loop.axis = ctx.target[1]
            for _lst, value, node in ctx.appends.values():  # (known only now: `choice` may follow)
                if loop.axis in value.dims:
                    raise t.error(node, _stacked_twice(value.dims, loop.axis))
        elif loop.end is not None:  # a new dynamic dim: as many frames as each sequence ran steps
            stacked = [n for lst, _, _ in ctx.appends.values() for n in lst.bound_in(env)]
            loop.axis = t.dims.fresh_dynamic(f"{stacked[0]}_time" if stacked else "steps").name
        for c in loop.carries:
            nxt = env.get(c.name)
            node = ctx.assigned[c.name]
            if not isinstance(nxt, V.TV):
                raise t.error(node, f"loop state `{c.name}` must stay a tensor")
            nxt = self.capture(nxt, body, node)
            if nxt.dims != c.inner.dims or nxt.value.dtype != c.inner.dtype:
                raise t.error(
                    node,
                    f"loop state `{c.name}` changes in the loop: [{', '.join(c.inner.dims)}] before, "
                    f"[{', '.join(nxt.dims)}] after a step",
                )
            if nxt.value.sparse_dim != c.inner.sparse_dim and _reads_class_dim(
                t.dims, loop, c.inner.id, nxt.value.sparse_dim
            ):
                # the body read the previous value with the class dim it had before the loop; from
                # the second step on it is a step's value, with another (eager mode runs on that)
                raise t.error(
                    node,
                    f"loop state `{c.name}` changes in the loop: {_labels(c.inner)} before, "
                    f"{_labels(nxt.value)} after a step, and the body reads it as {_labels(c.inner)}",
                )
            c.next = nxt.value.id
            c.out = t.new_value(c.inner.dims, c.inner.dtype, name=c.name, sparse_dim=c.inner.sparse_dim)
            env[c.name] = V.TV(c.out, outer)
        self._after_end(ctx, outer, final)
        if ctx.kind is not None:
            ctx.kind.end_body(t, body, ctx.appends)
        for name in list(ctx.assigned) + sorted(target_names - set(ctx.assigned)):
            v = env.get(name)
            if name in carried or name in ctx.after_end or not isinstance(v, V.TV) or not _inside(v.block, body):
                continue
            v = self.capture(v, body, ctx.assigned.get(name, ctx.stmt))
            out = t.new_value(v.dims, v.value.dtype, name=name, sparse_dim=v.value.sparse_dim)
            loop.lasts.append(LoopLast(name=name, value=v.value.id, out=out))
            env[name] = V.TV(out, outer)
        for lst, value, node in ctx.appends.values():
            dims = t.dims.canonical((*value.dims, loop.axis))
            names = lst.bound_in(env)
            out = t.new_value(
                dims, value.value.dtype, name=names[0] if names else None, sparse_dim=value.value.sparse_dim
            )
            loop.stacks.append(LoopStack(name=out.name or "stack", value=value.value.id, out=out))
            stacked = V.TV(out, outer, from_list=True)
            if ctx.kind is not None:
                stacked = ctx.kind.stacked(t, stacked, node)  # the append's source
            for n in names:
                env[n] = stacked
        if ctx.kind is not None:
            ctx.kind.close(t, loop, env, ctx.stmt.lineno)

    def _after_end(self, ctx: _LoopCtx, outer: V.Block, final: dict[str, Any]) -> None:
        """Names assigned after `if end(...): break`: after the loop each holds its last assignment
        that ran, as in Python. A sequence ending at step k (its `end` held) ran that step up to the
        `break`: a name assigned before it too holds that value, otherwise the value from step k-1,
        or from before the loop when k is the first step (so it must have one). A sequence stopped
        by its bound ran its last step whole."""
        t, loop, body, env = self.t, ctx.loop, ctx.block, ctx.env
        if not ctx.after_end:
            return
        uses = count_uses_in_loop(loop)
        uses.update(v.value.id for _, v, _ in ctx.appends.values())
        carries = {c.name: c for c in loop.carries}
        for name, node in ctx.after_end.items():
            c, fin, brk = carries.get(name), final.get(name), ctx.at_break.get(name)
            if c is not None and uses[c.inner.id]:  # its previous value is read: loop state
                raise t.error(node, f"loop state `{name}` is assigned after `if end(...): break`; assign it before")
            if not isinstance(fin, V.TV):
                if name not in ctx.before and name in env:
                    env[name] = V.Poison(name, ctx.stmt.lineno, after_end=True)
                continue
            fin = self.capture(fin, body, node)
            init = None
            if isinstance(brk, V.TV) and _inside(brk.block, body) and (c is None or brk.value.id != c.inner.id):
                # also assigned before the `break`: the ending step's value there, else the step's last
                brk = self.capture(brk, body, node)
                value = self._at_break(ctx, name, brk, fin, node)
            elif c is not None:
                value = fin.value.id
                init = self.capture(ctx.before[name], body, node).value.id
            else:
                env[name] = V.Poison(name, ctx.stmt.lineno, after_end=True)
                continue
            out = (
                c.out
                if c is not None
                else t.new_value(fin.dims, fin.value.dtype, name=name, sparse_dim=fin.value.sparse_dim)
            )
            if c is not None:
                loop.carries.remove(c)  # no state: its previous value is never read
            loop.lasts.append(LoopLast(name=name, value=value, out=out, after_end=init is not None, init=init))
            env[name] = V.TV(out, outer)

    def _at_break(self, ctx: _LoopCtx, name: str, brk: V.TV, fin: V.TV, node: ast.AST) -> int:
        """`where(end, brk, fin)` in the body: the value of a name assigned on both sides of the
        `break` (`brk` before it, `fin` after) at the end of a sequence's last step."""
        t = self.t
        if brk.value.id == fin.value.id:
            return fin.value.id
        if (brk.dims, brk.value.dtype, brk.value.sparse_dim) != (fin.dims, fin.value.dtype, fin.value.sparse_dim):
            raise t.error(
                node,
                f"`{name}` is assigned before and after `if end(...): break` with different dims or types "
                f"({brk.value.dtype}[{', '.join(brk.dims)}] and {fin.value.dtype}[{', '.join(fin.dims)}]); "
                "after the loop it would be either, per sequence",
            )
        outer, t.block = t.block, ctx.block
        try:
            (value,) = t.emit(REGISTRY["where"], [ctx.cond, brk, fin], {}, node)
        finally:
            t.block = outer
        return value.value.id

    def append(self, lst: V.PyList, value: Any, node: ast.AST) -> None:
        ctx = self.active[-1] if self.active else None
        if ctx is None or not ctx.stacks_into(lst):
            if any(c.stacks_into(lst) for c in self.active):
                raise self.t.error(
                    node, "append to a list of an outer loop inside a nested loop; stack in the inner loop first"
                )
            lst.items.append(value)  # a plain Python list, e.g. collected for concat
            return
        if not isinstance(value, V.TV):
            raise self.t.error(node, "only tensors can be stacked over a loop")
        if ctx.loop.axis and ctx.loop.axis in value.dims:
            raise self.t.error(node, _stacked_twice(value.dims, ctx.loop.axis))
        if self.t.tensor_if_depth > ctx.tensor_if_depth:
            raise self.t.error(node, "append inside an `if` on a tensor: both branches run; append after the `if`")
        if id(lst) in ctx.appends:
            raise self.t.error(node, "a list is appended to twice in one step; use one append per step")
        if ctx.end is not None:
            ctx.append_sides.add(not ctx.past_end)
            if len(ctx.append_sides) > 1:
                raise self.t.error(
                    node,
                    "appends before and after `if end(...): break` would give stacks of different "
                    "lengths; append all before it (the ending step counts) or all after",
                )
            ctx.loop.include_eos = not ctx.past_end
        value = self.capture(value, ctx.block, node)
        if value.value.name is None:  # an expression appended directly is named after its list
            value.value.name = self.t.stmt_target
        ctx.appends[id(lst)] = (lst, value, node)

    def choice(self, node: ast.Call) -> V.TV:
        return trace_choice(self, node)

    def no_growing_list(self, v: Any, node: ast.AST) -> None:
        """A list read as a tensor inside the loop that appends to it would be the frames so far."""
        if not isinstance(v, V.PyList) or not any(c.stacks_into(v) for c in self.active):
            return
        name = next(iter(v.bound_in(self.t.env)), "the list")
        raise self.t.error(
            node,
            f"`{name}` is read while the loop appends to it: the frames stacked so far (a growing "
            "state, RETURNN `cum_concat`) are not supported; read it after the loop, or attend over a "
            "whole sequence computed before the loop",
        )

    def index(self, x: V.TV, idx: V.LoopIndex, node: ast.AST) -> V.TV:
        ctx = next((c for c in self.active if c.index is idx), None)
        if ctx is None:
            raise self.t.error(node, "the loop index is only valid inside its loop")
        axis = self._step_axis(ctx, x, node) if idx.step else idx.axis
        if axis not in x.dims:
            raise self.t.error(node, f"cannot index [{', '.join(x.dims)}] by the loop index over `{axis}`")
        outer = self.capture(x, ctx.block.parent, node)
        frame = idx.seqs.get(outer.value.id)
        if frame is None:
            v = outer.value
            inner = self.t.new_value(tuple(d for d in v.dims if d != axis), v.dtype, sparse_dim=v.sparse_dim)
            ctx.loop.seqs.append(LoopSeq(outer=v.id, inner=inner))
            frame = idx.seqs[v.id] = V.TV(inner, ctx.block)
        return self.capture(frame, self.t.block, node)

    def _step_axis(self, ctx: _LoopCtx, x: V.TV, node: ast.AST) -> str:
        """The dim `x[i]` reads by the step of a loop with `end`: training's, the dim of its
        `choice`'s target (checked at the loop's end where the choice follows: `_close`)."""
        if ctx.target is not None:
            return ctx.target[1]
        dyn = self.t.dims.dynamic(x.dims)
        if len(dyn) != 1:
            raise self.t.error(
                node,
                f"`x[i]` by the step of a loop with `end` reads a sequence over the dim training runs over "
                f"(its `choice`'s target's); before the loop's first `choice` that is its one dynamic dim, "
                f"and [{', '.join(x.dims)}] has {len(dyn)}",
            )
        ctx.step_reads.append((dyn[0], node))
        return dyn[0]

    def end_break(self, node: ast.If) -> bool:
        """An `if end(...)` outside a loop's top level (inside a loop it is handled by `_run`)."""
        if _is_end(node, self.t):
            raise self.t.error(
                node, "`if end(cond): break` must be a statement of a loop body (not nested in another block)"
            )
        return False

    def unbound_read(self, node: ast.Name) -> None:
        for ctx in reversed(self.active):
            if ctx.env is self.t.env and node.id in ctx.assigned:
                raise self.t.error(
                    node,
                    f"`{node.id}` is read before it is assigned in the loop body and has no value "
                    f"before the loop; give the state an initial value before the loop "
                    f"(e.g. `{node.id} = zeros(batch, ...)`)",
                )


def _stacked_twice(dims: tuple[str, ...], axis: str) -> str:
    return (
        f"cannot stack [{', '.join(dims)}] over `{axis}`: it already has that dim (the whole "
        f"sequence), and a tensor has each dim once; reduce over `{axis}` first"
    )


def _is_end(node: ast.AST, t: Tracer) -> bool:
    """`if end(cond): break`, its callee netc's `end` (imported, also under another name, or
    `nc.end` of `import netc as nc`); `end` itself unimported is an error (eager mode would fail)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Call) or node.orelse:
        return False
    call = node.test
    if len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
        return False
    if len(node.body) != 1 or not isinstance(node.body[0], ast.Break):
        return False
    return netc_callee(call.func, t.env, t.globals, "end", t.error)


def _find_end(stmts: list[ast.stmt], t: Tracer) -> ast.If | None:
    ends = [s for s in stmts if _is_end(s, t)]
    return ends[0] if ends else None


def _target_names(t: ast.AST) -> list[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for el in t.elts for n in _target_names(el)]
    return []


def _inside(block: V.Block, body: V.Block) -> bool:
    while block is not None:
        if block is body:
            return True
        block = block.parent
    return False


def _unstack_args(x, axis):
    return x, axis
