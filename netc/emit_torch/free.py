"""Frees each intermediate of an emitted method after its last use.

A method's locals live until it returns: a tensor the backward pass does not keep (the input of a
`tanh`, a mask, a stack once concatenated) would otherwise stay allocated to the end of `forward`,
and the peak memory of a training step is reached there. A `del` after the statement that last
reads a name lets torch release it at once (autograd still holds what the backward needs). Only
names every path assigns (a top-level assignment before the `del`) are freed; names a nested
function reads (a `scan` step's closure) stay, and the method's parameters and sizes are left.
"""

from __future__ import annotations

import ast
import textwrap


def _stored(stmt: ast.stmt) -> set[str]:
    """The names a top-level assignment binds."""
    if not isinstance(stmt, ast.Assign):
        return set()
    return {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def free_after_last_use(body: str, keep: set[str]) -> str:
    """`body` (a method's statements, indented) with `del` lines after the last reads of its
    top-level locals, except the names in `keep`."""
    lines = body.split("\n")
    tree = ast.parse(textwrap.dedent(body))
    if not tree.body:
        return body
    first = next(line for line in lines if line.strip())
    indent = first[: len(first) - len(first.lstrip())]
    captured = {
        n.id
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for n in ast.walk(node)
        if isinstance(n, ast.Name)
    }
    first_store: dict[str, int] = {}
    last_load: dict[str, int] = {}
    for i, stmt in enumerate(tree.body):
        for name in _stored(stmt):
            first_store.setdefault(name, i)
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                last_load[n.id] = i
    freed: dict[int, list[str]] = {}
    for name, i in last_load.items():
        if name in keep or name in captured or first_store.get(name, i + 1) > i:
            continue
        if isinstance(tree.body[i], ast.Return | ast.Raise):
            continue
        freed.setdefault(i, []).append(name)
    out = []
    done = 0
    for i, stmt in enumerate(tree.body):
        out += lines[done : stmt.end_lineno]
        done = stmt.end_lineno
        if i in freed:
            out.append(f"{indent}del {', '.join(sorted(freed[i], key=first_store.__getitem__))}")  # as defined
    out += lines[done:]
    return "\n".join(out)
