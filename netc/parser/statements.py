"""The tracer's statements: assignments (names, tuples, `Module` attributes), expression
statements, `return`, `if` on a value known at compile time or on one bool per sequence (both
branches run, merged by `where`); loops go to `LoopBuilder` (a mixin of `Tracer`, split from it
for size: `self` is the tracer)."""

from __future__ import annotations

import ast
from typing import Any

from netc.ops import REGISTRY
from netc.parser import values as V
from netc.parser.symbols import BINOPS


class Statements:
    def run_body(self, stmts) -> None:
        for stmt in stmts:
            self.stmt(stmt)

    def stmt(self, stmt: ast.AST) -> None:
        self.budget.enter(stmt)
        try:
            self._stmt(stmt)
        finally:
            self.budget.leave()

    def _stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, SIMPLE_STATEMENTS):
            self.small_stmt(stmt)
        elif isinstance(stmt, ast.For):
            self.loops.for_loop(stmt)
        elif isinstance(stmt, ast.While):
            self.loops.while_loop(stmt)
        elif isinstance(stmt, ast.If):
            self.if_stmt(stmt)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            raise self.error(stmt, "define functions and classes at module level")
        else:
            raise self.error(stmt, f"{stmt_kind(stmt)} is not supported in a network")

    def unrolled(self, stmt: ast.For, steps: range) -> None:
        """`for k in range(4):` (a static range, no `end`): the body once per value, as Python runs
        it (`k` a compile-time int; in a loop body, all of it in the loop's step)."""
        if stmt.orelse:
            raise self.error(self.else_clause(stmt), "`for ... else` is not supported")
        if not isinstance(stmt.target, ast.Name):
            raise self.error(stmt.target, "`for k in range(...)` binds one name")
        for k in steps:
            self.env[stmt.target.id] = k
            for s in stmt.body:
                if isinstance(s, (ast.Break, ast.Continue)):
                    raise self.error(s, "`break`/`continue` in a loop over a static `range` are not supported")
                self.stmt(s)

    def if_stmt(self, node: ast.If) -> None:
        if self.loops.end_break(node):
            return
        cond = self.eval_expr(node.test)
        if isinstance(cond, V.TV):
            self.tensor_if(node, cond)
            return
        if not isinstance(cond, (bool, int, float, str, type(None))):
            raise self.error(node.test, "`if` needs a condition known at compile time")
        self.run_body(node.body if cond else node.orelse)  # an `elif` is an `if` in the else branch

    def tensor_if(self, node: ast.If, cond: V.TV) -> None:
        """`if` on one bool per sequence: both branches run, each variable then takes its value
        from the branch each sequence chose (RETURNN `switch`, torch `where`)."""
        if cond.value.dtype != "bool" or not set(cond.dims) <= {"batch"}:
            raise self.error(
                node.test,
                f"`if` on a tensor needs one bool per sequence (dims within [batch]), got "
                f"{cond.value.dtype}[{', '.join(cond.dims)}]",
            )
        env = self.env
        before = dict(env)
        branches = []
        self.tensor_if_depth += 1
        try:
            for body in (node.body, node.orelse):
                env.clear()
                env.update(before)
                self.run_body(body)
                branches.append(dict(env))
        except V.Return as r:  # both branches run: the return would be taken whatever the condition
            raise self.error(
                r.node, "`return` inside an `if` on a tensor; assign a variable and return after the `if`"
            ) from None
        finally:
            self.tensor_if_depth -= 1
        env.clear()
        env.update(before)
        then, other = branches
        for name in dict.fromkeys([*then, *other]):
            a, b = then.get(name, _MISSING), other.get(name, _MISSING)
            if a is b:
                env[name] = a
            elif a is _MISSING or b is _MISSING:
                env[name] = V.Poison(name, self.span(node).line)
            elif isinstance(a, V.TV) and isinstance(b, V.TV):
                self.stmt_target = name
                try:
                    merged = self.emit(REGISTRY["where"], [cond, a, b], {}, node)[0]
                finally:
                    self.stmt_target = None
                merged.value.name = merged.value.name or name
                env[name] = merged
            else:
                raise self.error(node, f"`{name}` gets different Python values in the branches of an `if` on a tensor")

    def small_stmt(self, small: ast.stmt) -> None:
        if isinstance(small, ast.Assign):
            target = small.targets[0] if len(small.targets) == 1 else None
            self.stmt_target = target.id if isinstance(target, ast.Name) else None
            if isinstance(target, ast.Attribute):
                self.stmt_target = target.attr
            try:
                value = self.eval_expr(small.value)
            finally:
                self.stmt_target = None
            for t in small.targets:
                self.assign(t, value)
        elif isinstance(small, ast.AnnAssign):
            if small.value is None:
                raise self.error(small, "annotation without a value")
            self.assign(small.target, self.eval_expr(small.value))
        elif isinstance(small, ast.AugAssign):
            if type(small.op) not in BINOPS:
                raise self.error(small, "unsupported augmented assignment")
            left = self.eval_expr(small.target)
            self.stmt_target = small.target.id if isinstance(small.target, ast.Name) else None
            try:
                value = self.binop(small.op, left, self.eval_expr(small.value), small)
            finally:
                self.stmt_target = None
            self.assign(small.target, value)
        elif isinstance(small, ast.Expr):
            if not is_string(small):
                self.stmt_target = _appended_to(small.value)  # `ys.append(Linear(...)(h))` names it `ys`
                try:
                    self.eval_expr(small.value)
                finally:
                    self.stmt_target = None
        elif isinstance(small, ast.Return):
            raise V.Return(self.eval_expr(small.value) if small.value else None, small)
        elif isinstance(small, ast.Pass):
            pass
        else:
            raise self.error(small, f"{stmt_kind(small)} is not supported in a network")

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, V.TV) and value.value.name is None:
                value.value.name = target.id
            self.bind(self.env, target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = value if isinstance(value, (tuple, list)) else None
            if any(isinstance(el, ast.Starred) for el in target.elts):
                raise self.error(target, "starred assignment targets are not supported")
            if items is None or len(items) != len(target.elts):
                n = len(items) if items is not None else "a non-sequence"
                raise self.error(target, f"cannot unpack {n} into {len(target.elts)} names")
            for el, v in zip(target.elts, items):
                self.assign(el, v)
        elif isinstance(target, ast.Attribute):
            obj = self.eval_expr(target.value)
            if isinstance(obj, V.OpModule) and isinstance(value, V.ParamRef):  # PyTorch's way of tying
                raise self.error(
                    target,
                    f"a module's parameters are fixed at its construction: tie them there, "
                    f"`{obj.path} = {REGISTRY[obj.op].fn_name}(..., {target.attr}={value.module.path}.{value.attr})`",
                )
            if not isinstance(obj, V.ModuleInstance):
                raise self.error(target, "only `self.<name> = ...` attributes of Modules can be assigned")
            if isinstance(value, V.TV) and value.value.name is None:
                value.value.name = target.attr
            obj.attrs[target.attr] = value
            if self.attr_log is not None:
                self.attr_log.setdefault(self.span(target).key(), []).append((obj, value))
        else:
            raise self.error(target, "unsupported assignment target")


_MISSING = object()


# statements without a body (`ast.stmt` subclasses that are not compound statements)
SIMPLE_STATEMENTS = (
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Expr,
    ast.Return,
    ast.Pass,
    ast.Delete,
    ast.Raise,
    ast.Assert,
    ast.Global,
    ast.Nonlocal,
    ast.Import,
    ast.ImportFrom,
    ast.Break,
    ast.Continue,
)
_STATEMENT_KINDS = {
    ast.Delete: "`del`",
    ast.Raise: "`raise`",
    ast.Assert: "`assert`",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Import: "`import`",
    ast.ImportFrom: "`import`",
    ast.Break: "`break`",
    ast.Continue: "`continue`",
    ast.Try: "`try`",
    ast.TryStar: "`try`",
    ast.With: "`with`",
    ast.AsyncWith: "`async with`",
    ast.AsyncFor: "`async for`",
    ast.Match: "`match`",
}


def stmt_kind(stmt: ast.stmt) -> str:
    return _STATEMENT_KINDS.get(type(stmt), type(stmt).__name__)


def is_string(stmt: ast.stmt) -> bool:
    """A string on its own: a docstring."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _appended_to(expr: ast.expr) -> str | None:
    """`ys` for `ys.append(...)`."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "append":
        target = expr.func.value
        return target.id if isinstance(target, ast.Name) else None
    return None
