"""Dead-code removal on a model's network function, at the source level (ast).

The generator writes values that nothing reads; the compiler drops them with their parameters,
and a model that constructs a module whose result is unused is a construct of its own (feature
`unused_module_result`), so generated programs keep only live statements. The shrinker uses it
too, after each cut.

Liveness: the returned values, losses, `end` conditions and bare calls are roots; an assignment
(or `append`) is live when one of its targets is, and then what it reads is. A state's update
reading the state itself does not make it live.
"""

from __future__ import annotations

import ast


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _targets(stmt: ast.stmt) -> set[str] | None:
    """Names a statement defines; None for a root (kept, reads live): a `choice` is one, read or
    not (it makes its loop a decoder)."""
    if isinstance(stmt, ast.Assign) and _is_choice(stmt.value):
        return None
    if isinstance(stmt, ast.Assign):
        return {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id}
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        if isinstance(f, ast.Attribute) and f.attr == "append" and isinstance(f.value, ast.Name):
            return {f.value.id}
    return None


def _is_choice(e: ast.expr) -> bool:
    return isinstance(e, ast.Call) and ast.unparse(e.func).split(".")[-1] == "choice"


def _reads(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Assign):
        return _loads(stmt.value)
    if isinstance(stmt, ast.AugAssign):
        return _loads(stmt.value) | {stmt.target.id}
    return _loads(stmt)


def _walk(body: list[ast.stmt]):
    for s in body:
        yield s
        if isinstance(s, (ast.For, ast.While, ast.If)):
            yield from _walk(s.body)
            yield from _walk(s.orelse)


def _compound_reads(s: ast.stmt) -> set[str]:
    if isinstance(s, ast.For):
        return _loads(s.iter)
    if isinstance(s, ast.If | ast.While):
        return _loads(s.test)
    return set()


def prune_function(fn: ast.FunctionDef) -> None:
    """Liveness to a fixpoint: a compound statement (loop, `if`) is live when a statement in
    it is, and then its header's reads and its `end` condition are live too."""
    stmts = list(_walk(fn.body))
    live: set[str] = set()
    for s in stmts:  # roots
        if isinstance(s, ast.Return | ast.Expr | ast.Assign) and _targets(s) is None:  # an Assign: a `choice`
            live |= _loads(s)
    changed = True
    while changed:
        changed = False
        for s in stmts:
            t = _targets(s)
            if t and (t & live or _makes_live_dim(s, live)):
                new = (_reads(s) | t) - live
            elif isinstance(s, ast.For | ast.While | ast.If) and _has_live(s, live):
                new = _compound_reads(s) - live
                for b in s.body:
                    if _is_end(b):
                        new |= _loads(b.test) - live
            else:
                continue
            if new:
                live |= new
                changed = True
    fn.body = _sweep(fn.body, live) or [ast.Pass()]


def _makes_live_dim(s: ast.stmt, live: set[str]) -> bool:
    """A `max_pool` gives its new dim lengths, which `zeros(batch, new_time)` may need (also a
    call within the assigned expression: `reduce_sum(Conv2d(...)(x, ..., out_axis=t), ...)`)."""
    if not isinstance(s, ast.Assign):
        return False
    calls = [c for c in ast.walk(s.value) if isinstance(c, ast.Call)]
    return any(k.arg == "out_axis" and _loads(k.value) & live for c in calls for k in c.keywords)


def _has_live(s: ast.stmt, live: set[str]) -> bool:
    for b in _walk(s.body + s.orelse):
        t = _targets(b)
        if t and t & live:
            return True
    return False


def _sweep(body: list[ast.stmt], live: set[str]) -> list[ast.stmt]:
    out = []
    for s in body:
        t = _targets(s)
        if t is not None and not (t & live):
            continue
        if isinstance(s, ast.For | ast.While):
            if not _has_live(s, live):
                continue
            s.body = _sweep(s.body, live)
        elif isinstance(s, ast.If) and not _is_end(s):
            if not _has_live(s, live):
                continue
            s.body = _sweep(s.body, live)
            s.orelse = _sweep(s.orelse, live)
            if not s.body:
                if not s.orelse:
                    continue
                s.body = [ast.Assign([ast.Name("_unused", ast.Store())], ast.Constant(0), lineno=0)]
        out.append(s)
    return out


def _is_end(s: ast.stmt) -> bool:
    return isinstance(s, ast.If) and "end" in ast.unparse(s.test)


def prune_source(source: str, module_level: bool = False) -> str:
    """`module_level`: also drop module-level functions, classes and dims nothing names."""
    for _ in range(8):  # removing a statement can make what it read dead: to a fixpoint
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any("network" in ast.unparse(d) for d in node.decorator_list):
                prune_function(node)
        if module_level:
            used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
            tree.body = [n for n in tree.body if not _unused_def(n, used)]
        new = ast.unparse(tree) + "\n"
        if new == source:
            break
        source = new
    return source


def _unused_def(node: ast.stmt, used: set[str]) -> bool:
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return node.name not in used and not node.decorator_list
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id not in used
    return False
