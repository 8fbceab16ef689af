"""Values of `netc import --no-exec`'s evaluator (`noexec`): what a config may compute (plain data,
RETURNN's dim tags as recipes, the names of RETURNN's API it may use) and RETURNN's `config`
reads while the file runs."""

from __future__ import annotations

import ast
import builtins
import operator
from dataclasses import dataclass, field

# the names of RETURNN's dim API a config may import, by module
DIM_MODULES = {
    "returnn.tensor": {"Dim", "batch_dim"},
    "returnn.tf.util.data": {"Dim", "FeatureDim", "SpatialDim", "batch_dim", "DimensionTag"},
}
DIM_ALIASES = {"DimensionTag": "Dim"}  # RETURNN's older names, as its compatibility layer has them
DIM_KINDS = ("Batch", "Spatial", "Time", "Feature", "Unspecified")
DIM_OPTIONS = {"name", "kind", "description", "dimension"}
SAFE_BUILTINS = {
    n: getattr(builtins, n)
    for n in "range len enumerate zip dict list tuple int float str bool min max sum abs sorted reversed round any all "
    "isinstance".split()
}
METHODS = {
    dict: {"update", "copy", "get", "items", "keys", "values", "pop", "setdefault"},
    list: {"append", "extend", "insert", "copy", "index", "count", "pop"},
    tuple: {"index", "count"},
    str: {
        "format",
        "join",
        "upper",
        "lower",
        "replace",
        "split",
        "strip",
        "rstrip",
        "lstrip",
        "startswith",
        "endswith",
    },
}
CONFIG_METHODS = {"value", "int", "float", "bool", "typed_value", "opt_typed_value", "has", "is_true", "bool_or_other"}
BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.BitXor: operator.xor,
}  # fmt: skip
IBINOPS = {
    ast.Add: operator.iadd, ast.Sub: operator.isub, ast.Mult: operator.imul, ast.Div: operator.itruediv,
    ast.FloorDiv: operator.ifloordiv, ast.Mod: operator.imod, ast.Pow: operator.ipow, ast.BitOr: operator.ior,
}  # fmt: skip
CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip
UNOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
MAX_ITEMS = 1_000_000  # a sequence a config makes (`range`, `*`): beyond, it is refused, not built
MAX_STEPS = 2_000_000  # expressions evaluated in all
MAX_MADE = 10_000_000  # items of the strings and lists made in all (memory)
MAX_BITS = 10_000  # an integer the config makes (JSON writes up to 4300 digits)
PLAIN = (int, float, str, bool, type(None), list, tuple, dict)


@dataclass(eq=False)
class DimValue:
    """A dim tag as the config makes it: RETURNN's constructor and its (data) arguments."""

    make: str  # "Dim", "batch_dim" or "copy" (of `of`)
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    of: DimValue | None = None

    @property
    def dimension(self) -> int | None:
        if self.make == "copy":
            return self.of.dimension
        return self.kwargs.get("dimension", self.args[0] if self.args else None)


@dataclass(frozen=True)
class DimKind:
    name: str


@dataclass(frozen=True)
class Special:
    """A name of RETURNN's API a config may use: `Dim`, `Dim.Types`, `FeatureDim`, `SpatialDim`, `config`."""

    name: str


@dataclass(frozen=True)
class Opaque:
    """A name the config binds to something --no-exec does not evaluate (a module, a function)."""

    what: str


def describe(v) -> str:
    if isinstance(v, Opaque):
        return v.what
    if isinstance(v, DimValue):
        return "a dim tag"
    if isinstance(v, Special):
        return "RETURNN's `config`" if v.name == "config" else f"`{v.name}`"
    if any(v is b for b in SAFE_BUILTINS.values()):
        return f"the builtin `{v.__name__}`"
    return f"a value of type `{type(v).__name__}`"


def deep_plain(v, depth: int = 0) -> bool:
    if depth > 100:
        return False
    if isinstance(v, list | tuple):
        return all(deep_plain(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(deep_plain(k, depth + 1) and deep_plain(x, depth + 1) for k, x in v.items())
    return isinstance(v, PLAIN)


class ConfigReads:
    """RETURNN's `Config` while it runs the file: its own values (the names bound so far) first,
    then `++name value` options (strings, as `Config.add_line` keeps them), else the default."""

    env: dict
    cmd: dict[str, list[str]]

    def config_value(self, key, default, index=None, list_join_str=","):
        if key in self.env:
            ls = self.env[key]
            if index is None:
                if isinstance(ls, list | tuple):
                    return list_join_str.join(str(v) for v in ls)
                return default if ls is None else str(ls)
            return str(ls[index])
        if key in self.cmd:
            return list_join_str.join(self.cmd[key]) if index is None else self.cmd[key][index]
        return default

    def config_typed_value(self, key, default=None, index=None):
        value = self.env.get(key, default)
        if index is not None and isinstance(value, list | tuple):
            value = value[index]
        return value

    def config_opt_typed_value(self, key, default=None):
        return self.env[key] if key in self.env else self.config_value(key, default)

    def config_has(self, key):
        return key in self.env or key in self.cmd

    def config_int(self, key, default, index=0):
        if key in self.env:
            return self.config_typed_value(key, default, index)
        return int(self.config_value(key, default, index)) if key in self.cmd else default

    def config_float(self, key, default, index=0):
        value = (
            self.config_typed_value(key, default, index) if key in self.env else self.config_value(key, default, index)
        )
        return float(value) if isinstance(value, str) else value

    def config_bool(self, key, default, index=0):
        if key in self.env:
            value = self.config_typed_value(key, default, index)
            return bool(value) if isinstance(value, int) else value
        if key not in self.cmd:
            return default
        v = str(self.config_value(key, None, index))
        return _to_bool(v) if v else default

    def config_bool_or_other(self, key, default=None, index=0):
        if key in self.env:
            return self.config_typed_value(key, default, index)
        if key not in self.cmd:
            return default
        v = str(self.config_value(key, None, index))
        try:
            return _to_bool(v) if v else default
        except ValueError:
            return v

    def config_is_true(self, key, default=False):
        return bool(self.env[key]) if key in self.env else self.config_bool(key, default)


def _to_bool(v: str) -> bool:
    """RETURNN's `to_bool`."""
    try:
        return bool(int(v))
    except ValueError:
        pass
    if v.lower() in ("true", "yes", "on", "1"):
        return True
    if v.lower() in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"to_bool cannot handle {v!r}")
