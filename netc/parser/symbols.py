"""Names and tables the tracer's parts share: what `from netc import ...` may bring in, the
builtins a model may call, Python operators as IR ops and as Python functions, and how a value
is described in an error message."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from netc.ops import BY_FN_NAME, ITERABLES
from netc.parser import values as V

# names `from netc import ...` may bring in that are not ops
DSL_SYMBOLS = {
    "Dim",
    "batch",
    "Tensor",
    "Labels",
    "network",
    "Module",
    "unstack",
    "stack",
    "mark_as_loss",
    "end",
    "choice",
    "transducer_search",
} | set(ITERABLES)  # (and the loop kinds' iterables)


NETC_NAMES = DSL_SYMBOLS | set(BY_FN_NAME)


BUILTINS = {"range", "zip", "reversed", "super", "print", "len", "float", "int", "tuple", "list", "abs", "round"}


BINOPS = {
    ast.Add: ("add", lambda a, b: a + b),
    ast.Sub: ("sub", lambda a, b: a - b),
    ast.Mult: ("mul", lambda a, b: a * b),
    ast.Div: ("div", lambda a, b: a / b),
    ast.FloorDiv: ("floordiv", lambda a, b: a // b),
    ast.Mod: ("mod", lambda a, b: a % b),
    ast.Pow: ("pow", lambda a, b: a**b),
}


COMPARE = {
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
}


PY_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.Gt: lambda a, b: a > b,
    ast.LtE: lambda a, b: a <= b,
    ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


SCALARS = (str, int, float, bool, type(None))  # Python values usable as dict keys


OPERATOR_SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
}


INDEXING = (
    "netc indexes tensors by a loop index (`x[t]` in `for t in range(x.max_seq_len)`), and Python lists, "
    "tuples and dicts by their Python keys (`parts[0]`, `parts[1:]`)"
)


def describe(v: Any) -> str:
    if isinstance(v, V.TV):
        return f"a tensor [{', '.join(v.dims)}]"
    if isinstance(v, V.DimRef):
        return f"dim `{v.name}`"
    if isinstance(v, V.PyList):
        return "a list"
    if isinstance(v, V.SeqLen):
        return "`max_seq_len`"
    if isinstance(v, (V.FunctionRef, V.ClassRef)):
        return f"`{v.node.name}`"
    if isinstance(v, V.NetcSym):
        return f"`{v.name}`"
    if isinstance(v, V.ParamRef):
        return f"the parameter `{v.module.path}.{v.attr}` (only a module's `{v.attr}=` takes it)"
    if isinstance(v, V.OpModule):
        return f"module `{v.path}`"
    if isinstance(v, (int, float, str, bool)) or v is None:
        return f"`{v!r}`"
    return getattr(type(v), "what", type(v).__name__)  # a value of the parser's own that says what it is


def not_imported(name: str) -> str:
    """The error for a netc name the model uses without importing it (eager mode runs the file as
    Python: a NameError there)."""
    return f"`{name}` is not imported: add `from netc import {name}`"


def netc_callee(func: ast.expr, env: dict, globals_: dict, name: str, error: Callable) -> bool:
    """Whether the callee `func`, which the parser matches by form (`if end(cond): break`), is netc's
    `name`: imported (under any name) or an attribute of `import netc as nc`. The bare name
    bound to nothing is the located error `error(node, message)` gives."""
    if isinstance(func, ast.Name):
        sym = env.get(func.id, globals_.get(func.id))
        if sym is None and func.id == name:
            raise error(func, not_imported(name))
        return isinstance(sym, V.NetcSym) and sym.name == name
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        module = env.get(func.value.id, globals_.get(func.value.id))
        return isinstance(module, V.NetcModule) and func.attr == name
    return False


def netc_symbol(name: str) -> Any:
    return V.DimRef("batch") if name == "batch" else V.NetcSym(name)


def loss_args(value, name):
    return value, name


def dim_args(name, size=None) -> tuple[str, int | None]:
    if not isinstance(name, str) or not (size is None or (isinstance(size, int) and size > 0)):
        raise TypeError
    return name, size
