"""`netc import --no-exec`: a config's `network`, `extern_data`/`num_outputs` and `task` evaluated
from its syntax tree, never run.

The evaluator walks the statements that `noexec_flow` finds the importer needs (datasets, unused
functions, learning rates are skipped) and knows a small language: literals, names, arithmetic,
`%`/f-string/`.format` formatting, comprehensions, `if`, `for` over lists and ranges, item
assignment, a few builtins (`range`, `len`, `dict`, ...) and methods of dicts, lists and strings,
RETURNN's `config.value/int/float/bool/typed_value` (answered from `--set`), and RETURNN's dim
tags (`Dim`, `FeatureDim`, `SpatialDim`, `batch_dim`, `Dim.Types`, `dim.copy`), kept as recipes
that the loader rebuilds with RETURNN itself. Anything else is a `CompileError` at the construct:
nothing of the file is imported, called or compiled."""

from __future__ import annotations

import ast

from netc.errors import CompileError, Span
from netc.importer.noexec_expr import Expressions
from netc.importer.noexec_flow import Flow
from netc.importer.noexec_values import DIM_ALIASES, DIM_MODULES, IBINOPS, DimKind, DimValue, Opaque, Special, describe

STATEMENTS = {
    ast.While: "a `while` loop", ast.With: "a `with` statement", ast.Try: "a `try` statement",
    ast.Global: "a `global` statement", ast.Raise: "a `raise` statement", ast.Match: "a `match` statement",
    ast.AsyncFor: "an `async for` loop", ast.AsyncWith: "an `async with` statement",
}  # fmt: skip


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


_MAX_FUNCTION_GLOBALS = 20


def _function_globals(path: str, text: str, tree: ast.Module, sets, known: set[str]) -> dict:
    """The config's plain values (numbers, strings, bools) that its functions read (an `eval` calling
    them reads them: `lm_scale`, set under `if config.has(...)`), where --no-exec can evaluate them."""
    bound = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    bound |= {
        t.id
        for n in tree.body
        if isinstance(n, ast.If)
        for m in ast.walk(n)
        if isinstance(m, ast.Assign)
        for t in m.targets
        if isinstance(t, ast.Name)
    }
    read = {
        m.id
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
        for m in ast.walk(n)
        if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Load)
    }
    names = sorted((bound & read) - known)[:_MAX_FUNCTION_GLOBALS]
    out: dict = {}
    for key in names:  # each on its own: one outside the language is no error
        try:
            value = _Evaluator(path, text, tree, sets).run({key})
        except CompileError:
            continue
        if isinstance(value.get(key), str | int | float | bool):
            out[key] = value[key]
    return out


def evaluate_config(path: str, sets: list[tuple[str, str]], network: str) -> dict:
    """The config's values the importer reads, by name (those the config binds), and its dim tags
    as recipes: `{"values": {...}, "dims": [...]}`, JSON data (see `encode`)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CompileError(None, f"the config cannot be read: {e}", file=path) from e
    if not (text.strip().startswith("#!") or path.endswith(".py")):
        raise CompileError(None, "--no-exec reads Python configs only (a first line `#!...`, or a `.py` file)", path)
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        line = e.lineno or 1
        span = Span(
            file=path, line=line, col=max((e.offset or 1) - 1, 0), end_line=line, end_col=len(_line(text, line))
        )
        raise CompileError(span, f"the config fails to load: SyntaxError: {e.msg}") from e
    except (RecursionError, MemoryError, ValueError) as e:
        raise CompileError(None, f"the config fails to load: {type(e).__name__}", file=path) from e
    roots = {network, "extern_data"}
    values = _Evaluator(path, text, tree, sets).run(roots)
    if "extern_data" not in values:
        values = _Evaluator(path, text, tree, sets).run(roots | {"num_outputs"})
    # `target`: the default target of losses (and of an int `num_outputs`); `num_inputs`,
    # `sparse_input`, `default_input`: the old form of the input `data` beside `num_outputs`
    old_inputs = ("num_inputs", "sparse_input", "default_input") if "extern_data" not in values else ()
    for key in ("task", "target", *old_inputs):
        if key == network:
            continue
        # the config's own value where --no-exec can evaluate it (one outside the language is no
        # error), else RETURNN's: `--set`, or the default ("train", "classes")
        try:
            value = _Evaluator(path, text, tree, sets).run({key})
            if isinstance(value.get(key), str | int | bool):
                values[key] = value[key]
        except CompileError:
            pass
    values.update(_function_globals(path, text, tree, sets, set(values)))
    dims: list[DimValue] = []
    try:
        encoded = {k: encode(v, dims) for k, v in values.items()}
    except RecursionError as e:
        raise CompileError(None, "--no-exec cannot pass on values nested this deeply", file=path) from e
    except TypeError as e:
        raise CompileError(None, f"--no-exec cannot pass on {e}", file=path) from e
    return {"values": encoded, "dims": [_recipe(d, dims) for d in dims]}


def encode(value, dims: list[DimValue]):
    """Values as JSON: tuples, dicts (any keys), dim tags (by index into `dims`), kinds tagged."""
    if isinstance(value, int) and value.bit_length() > 10_000:
        raise TypeError("a number of more than 10000 bits")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [encode(v, dims) for v in value]
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, dims) for v in value]}
    if isinstance(value, dict):
        return {"__dict__": [[encode(k, dims), encode(v, dims)] for k, v in value.items()]}
    if isinstance(value, DimKind):
        return {"__dimkind__": value.name}
    if isinstance(value, DimValue):
        if value.of is not None:
            encode(value.of, dims)
        if not any(d is value for d in dims):
            for v in (*value.args, *value.kwargs.values()):
                encode(v, dims)
            dims.append(value)
        return {"__dim__": next(i for i, d in enumerate(dims) if d is value)}
    raise TypeError(f"{describe(value)}: not data")


def _recipe(d: DimValue, dims: list[DimValue]) -> dict:
    out = {
        "make": d.make,
        "args": encode(list(d.args), dims),
        "kwargs": {k: encode(v, dims) for k, v in d.kwargs.items()},
    }
    if d.of is not None:
        out["of"] = encode(d.of, dims)["__dim__"]
    return out


def _line(text: str, line: int) -> str:
    lines = text.splitlines()
    return lines[line - 1] if 1 <= line <= len(lines) else ""


class _Evaluator(Expressions):
    def __init__(self, path: str, text: str, tree: ast.Module, sets: list[tuple[str, str]]):
        self.path, self.lines, self.tree = path, text.splitlines(), tree
        self.env: dict = {}
        self.steps = self.items_made = 0
        self.cmd: dict[str, list[str]] = {}  # `++name value` as RETURNN's Config keeps it (untyped)
        for name, value in sets:
            value = value[1:] if value[:2] == "+-" else value
            self.cmd[name] = value.split(",") if value.find(",") > 0 else [value]

    def run(self, roots: set[str]) -> dict:
        try:
            self.flow = Flow(self.tree)
            self.flow.block(self.tree.body, roots)
            self.block(self.tree.body)
        except RecursionError as e:
            raise CompileError(None, "--no-exec cannot evaluate the config: nested too deeply", file=self.path) from e
        return {k: v for k, v in self.env.items() if k in roots}

    # -- statements ------------------------------------------------------------------------------

    def block(self, stmts: list[ast.stmt]) -> None:
        mask = self.flow.masks.get(id(stmts), [False] * len(stmts))
        for s, run in zip(stmts, mask):
            if run:
                self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        self.step(s)
        if isinstance(s, ast.Assign):
            value = self.eval(s.value)
            for t in s.targets:
                self.assign(t, value)
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            self.assign(s.target, self.eval(s.value))
        elif isinstance(s, ast.AugAssign):
            self.aug_assign(s)
        elif isinstance(s, ast.Expr):
            self.eval(s.value)
        elif isinstance(s, ast.If):
            self.block(s.body if self.truth(s.test) else s.orelse)
        elif isinstance(s, ast.For):
            self.for_loop(s)
        elif isinstance(s, ast.Break):
            raise _Break
        elif isinstance(s, ast.Continue):
            raise _Continue
        elif isinstance(s, ast.Pass):
            pass
        elif isinstance(s, ast.Import | ast.ImportFrom):
            self.import_(s)
        elif isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
            self.env[s.name] = Opaque(f"the function `{s.name}` of the config (line {s.lineno})")
        elif isinstance(s, ast.ClassDef):
            self.env[s.name] = Opaque(f"the class `{s.name}` of the config (line {s.lineno})")
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                self.delete(t)
        else:
            raise self.refuse(s, STATEMENTS.get(type(s), f"a `{type(s).__name__}` statement"))

    def for_loop(self, s: ast.For) -> None:
        items = self.iterate(s.iter, self.eval(s.iter))
        for item in items:
            self.assign(s.target, item)
            try:
                self.block(s.body)
            except _Break:
                break
            except _Continue:
                continue
        else:
            self.block(s.orelse)

    def import_(self, s: ast.Import | ast.ImportFrom) -> None:
        for a in s.names:
            if isinstance(s, ast.ImportFrom) and s.level == 0 and s.module in DIM_MODULES:
                if a.name == "*":
                    raise self.refuse(s, f"`from {s.module} import *`")
                if a.name in DIM_MODULES[s.module]:
                    # `DimensionTag` is RETURNN's older name of `Dim` (its compatibility alias)
                    made = DimValue("batch_dim") if a.name == "batch_dim" else Special(DIM_ALIASES.get(a.name, a.name))
                    self.env[a.asname or a.name] = made
                    continue
            if a.name == "*":
                raise self.refuse(s, f"`from {s.module} import *`")
            module = ("." * s.level + (s.module or "")) if isinstance(s, ast.ImportFrom) else a.name
            what = f"`{a.name}` of the module `{module}`" if isinstance(s, ast.ImportFrom) else f"the module `{module}`"
            bound = a.asname or a.name.split(".")[0]
            self.env[bound] = Opaque(f"{what} (imported at line {s.lineno})")

    def assign(self, target: ast.AST, value) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, ast.Tuple | ast.List):
            items = list(self.iterate(target, value))
            stars = [i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)]
            n = len(target.elts)
            if (not stars and len(items) != n) or (stars and len(items) < n - 1):
                raise self.fails(target, ValueError(f"cannot unpack {len(items)} values into {n} names"))
            if stars:
                i = stars[0]
                tail = len(items) - (n - 1 - i)
                items = items[:i] + [items[i:tail]] + items[tail:]
            for e, v in zip(target.elts, items):
                self.assign(e.value if isinstance(e, ast.Starred) else e, v)
        elif isinstance(target, ast.Subscript):
            obj, key = self.eval(target.value), self.index(target.slice)
            if not isinstance(obj, dict | list):
                raise self.refuse(target, f"an item assignment into {describe(obj)}")
            try:
                obj[key] = value
            except Exception as e:  # noqa: BLE001 - as the config would fail
                raise self.fails(target, e) from e
        elif isinstance(target, ast.Attribute):
            raise self.refuse(target, f"an assignment to the attribute `.{target.attr}`")
        else:
            raise self.refuse(target, "this assignment target")

    def aug_assign(self, s: ast.AugAssign) -> None:
        op = IBINOPS.get(type(s.op))
        if op is None:
            raise self.refuse(s, f"the operator `{type(s.op).__name__}=`")
        if isinstance(s.target, ast.Name):
            old = self.name(ast.Name(s.target.id, ast.Load(), **_pos(s.target)))
            self.env[s.target.id] = self.binop(s, op, old, self.eval(s.value))
        elif isinstance(s.target, ast.Subscript):
            obj, key = self.eval(s.target.value), self.index(s.target.slice)
            if not isinstance(obj, dict | list):
                raise self.refuse(s.target, f"an item assignment into {describe(obj)}")
            try:
                obj[key] = self.binop(s, op, obj[key], self.eval(s.value))
            except CompileError:
                raise
            except Exception as e:  # noqa: BLE001
                raise self.fails(s.target, e) from e
        else:
            raise self.refuse(s.target, "this assignment target")

    def delete(self, target: ast.AST) -> None:
        if isinstance(target, ast.Subscript):
            obj, key = self.eval(target.value), self.index(target.slice)
            if not isinstance(obj, dict | list):
                raise self.refuse(target, f"`del` of an item of {describe(obj)}")
            try:
                del obj[key]
            except Exception as e:  # noqa: BLE001
                raise self.fails(target, e) from e
        elif isinstance(target, ast.Name) and target.id in self.env:
            del self.env[target.id]
        else:
            raise self.refuse(target, "this `del`")


def _pos(node: ast.AST) -> dict:
    return {k: getattr(node, k) for k in ("lineno", "col_offset", "end_lineno", "end_col_offset")}
