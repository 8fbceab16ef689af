"""Delta reduction of a failing program, keeping its failure signature.

Edits on the AST of the network function, each followed by dead-code removal (prune.py) and a
re-check of the program (compiling it is part of the check, so an edit that makes the model
invalid is rejected: it fails differently): drop a statement (a whole loop or `if` first), drop
an output or a loss, replace an op call by one of its operands. Greedy, to a fixpoint or until
`budget` checks were spent. Only the backend of the failure runs during shrinking.
"""

from __future__ import annotations

import ast
import copy
import time
from collections.abc import Iterator
from dataclasses import replace

from .gen import Program
from .prune import prune_source
from .run import check_program


def _network(tree: ast.Module) -> ast.FunctionDef:
    return next(
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and any("network" in ast.unparse(d) for d in n.decorator_list)
    )


def _bodies(fn: ast.FunctionDef) -> Iterator[list[ast.stmt]]:
    stack = [fn.body]
    while stack:
        body = stack.pop(0)
        yield body
        for s in body:
            if isinstance(s, ast.For | ast.While | ast.If):
                stack += [s.body, s.orelse]


def candidates(source: str) -> Iterator[str]:
    """Smaller variants of `source`, biggest cuts first."""
    tree = ast.parse(source)
    fn = _network(tree)
    # 0. inputs nothing reads (other inputs, other random numbers: kept only if it still fails)
    read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    unread = [i for i, a in enumerate(fn.args.args) if a.arg not in read]
    if unread:
        t = copy.deepcopy(tree)
        args = _network(t).args.args
        args[:] = [a for i, a in enumerate(args) if i not in unread]
        yield ast.unparse(t)
    # 1. statements, outermost first
    n_bodies = len(list(_bodies(fn)))
    for bi in range(n_bodies):
        body = list(_bodies(fn))[bi]
        for si in range(len(body)):
            if isinstance(body[si], ast.Return):
                continue
            t = copy.deepcopy(tree)
            b = list(_bodies(_network(t)))[bi]
            del b[si]
            if not b:
                continue
            yield ast.unparse(t)
    # 2. outputs
    ret = fn.body[-1]
    if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict) and len(ret.value.keys) > 1:
        for k in range(len(ret.value.keys)):
            t = copy.deepcopy(tree)
            r = _network(t).body[-1].value
            del r.keys[k], r.values[k]
            yield ast.unparse(t)
    # 3. an op call replaced by one of its tensor operands
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and n.args]
    statements = {id(n.value) for n in ast.walk(fn) if isinstance(n, ast.Expr)}  # `out.append(v)`: not `v`
    for ci in range(len(calls)):
        for ai in range(len(calls[ci].args)):
            if not isinstance(calls[ci].args[ai], ast.Name | ast.Call | ast.BinOp) or id(calls[ci]) in statements:
                continue
            t = copy.deepcopy(tree)
            call = [n for n in ast.walk(_network(t)) if isinstance(n, ast.Call) and n.args][ci]
            arg = call.args[ai]
            replaced = _Replace(call, arg).visit(t)
            yield ast.unparse(replaced)


class _Replace(ast.NodeTransformer):
    def __init__(self, old: ast.AST, new: ast.AST):
        self.old, self.new = old, new

    def visit(self, node):
        if node is self.old:
            return self.new
        return super().visit(node)


def backends_of(signature: str) -> tuple[str, ...]:
    for b in ("eager", "torch", "returnn"):
        if f" {b}" in signature.split(":")[0]:
            return ("eager", b) if b != "eager" else ("eager",)
    return ("eager", "torch", "returnn")


def shrink(prog: Program, signature: str, budget: int = 120, max_seconds: float = 300.0) -> Program:
    """The smallest variant found that still fails with `signature` (or a signature it begins)."""
    start = time.monotonic()
    backends = backends_of(signature)
    best = replace(prog, source=prune_source(prog.source, module_level=True))

    def fails(rep) -> bool:
        return any(f.signature.startswith(signature) for f in rep.failures)

    if not fails(check_program(best, backends=backends)):
        return best  # not reproduced (another generator version): nothing to keep
    checks = 0
    resume = 0  # candidates before this index were tried on a program that had them too
    seen: set[str] = set()
    while checks < budget and time.monotonic() - start < max_seconds:
        accepted = False
        for i, cand in enumerate(candidates(best.source)):
            if i < resume:
                continue
            if checks >= budget or time.monotonic() - start > max_seconds:
                break
            try:
                src = prune_source(cand, module_level=True)
            except SyntaxError:
                continue
            if src in seen or len(src) >= len(best.source):
                continue
            seen.add(src)
            checks += 1
            trial = replace(prog, source=src, search=prog.search and "choice" in src)
            rep = check_program(trial, backends=backends)
            if fails(rep):
                best, resume, accepted = trial, max(0, i - 1), True
                break
        if not accepted:
            if resume == 0:
                break
            resume = 0  # one more pass from the start
    return best
