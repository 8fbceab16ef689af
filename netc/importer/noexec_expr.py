"""The expressions of `netc import --no-exec`'s evaluator (`noexec`): each a method `e_<node>`;
what is not one of them, or not of the values it knows, is a `CompileError` at the construct."""

from __future__ import annotations

import ast
import builtins
import operator
import re
import string

from netc.errors import CompileError, Span
from netc.importer.noexec_values import (
    BINOPS,
    CMPOPS,
    CONFIG_METHODS,
    DIM_KINDS,
    DIM_OPTIONS,
    MAX_BITS,
    MAX_ITEMS,
    MAX_MADE,
    MAX_STEPS,
    METHODS,
    PLAIN,
    SAFE_BUILTINS,
    UNOPS,
    ConfigReads,
    DimKind,
    DimValue,
    Opaque,
    Special,
    deep_plain,
    describe,
)


class Expressions(ConfigReads):
    path: str
    lines: list[str]
    steps: int
    items_made: int

    # -- errors ----------------------------------------------------------------------------------

    def span(self, node: ast.AST) -> Span:
        def char(line: int, col: int) -> int:  # ast's columns count UTF-8 bytes
            text = self.lines[line - 1] if 1 <= line <= len(self.lines) else ""
            return len(text.encode("utf-8")[:col].decode("utf-8", errors="replace"))

        line, end_line = node.lineno, node.end_lineno or node.lineno
        return Span(
            file=self.path,
            line=line,
            col=char(line, node.col_offset),
            end_line=end_line,
            end_col=char(end_line, node.end_col_offset or node.col_offset),
        )

    def refuse(self, node: ast.AST, what: str) -> CompileError:
        return CompileError(self.span(node), f"--no-exec cannot evaluate {what}")

    def fails(self, node: ast.AST, e: Exception) -> CompileError:
        """A Python error of an evaluated operation, as running the config would raise it."""
        if isinstance(e, CompileError):  # a refusal from within (`made`)
            return e
        return CompileError(self.span(node), f"the config fails to load: {type(e).__name__}: {e}")

    # -- expressions -----------------------------------------------------------------------------

    def step(self, node: ast.AST) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise self.refuse(node, f"the config: more than {MAX_STEPS} steps")

    def made(self, node: ast.AST, value):
        """Count the items of each string or list the config makes: beyond MAX_MADE, refused."""
        if isinstance(value, str | list | tuple | dict):
            self.items_made += len(value)
            if self.items_made > MAX_MADE:
                raise self.refuse(node, f"the config: more than {MAX_MADE} items made")
        return value

    def truth(self, node: ast.expr) -> bool:
        value = self.eval(node)
        if not isinstance(value, PLAIN):
            raise self.refuse(node, f"the truth of {describe(value)}")
        return bool(value)

    def eval(self, node: ast.expr):
        self.step(node)
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is None:
            raise self.refuse(node, _construct(node))
        return method(node)

    def e_Constant(self, node: ast.Constant):
        if isinstance(node.value, bytes | complex) or node.value is ...:
            raise self.refuse(node, f"a constant of type `{type(node.value).__name__}`")
        return node.value

    def e_Name(self, node: ast.Name):
        return self.name(node)

    def name(self, node: ast.Name, called: bool = False):
        if node.id in self.env:
            value = self.env[node.id]
        elif node.id == "config":
            value = Special("config")
        elif node.id in SAFE_BUILTINS:
            value = SAFE_BUILTINS[node.id]
        elif node.id == "eval" and called:  # of a Python literal only (`e_Call`)
            value = builtins.eval
        elif hasattr(builtins, node.id):
            raise self.refuse(node, f"{'a call of ' if called else ''}the builtin `{node.id}`")
        else:
            raise self.fails(node, NameError(f"name '{node.id}' is not defined"))
        if isinstance(value, Opaque):
            raise self.refuse(node, ("a call of " if called else "") + value.what)
        return value

    def e_List(self, node: ast.List) -> list:
        out = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                out.extend(self.iterate(e, self.eval(e.value)))
            else:
                out.append(self.eval(e))
        return out

    def e_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.e_List(node))

    def e_Dict(self, node: ast.Dict) -> dict:
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:  # `**other`
                other = self.eval(v)
                if not isinstance(other, dict):
                    raise self.fails(v, TypeError(f"'{type(other).__name__}' object is not a mapping"))
                out.update(other)
            else:
                key = self.eval(k)
                try:
                    out[key] = self.eval(v)
                except TypeError as e:
                    raise self.fails(k, e) from e
        return out

    def e_BinOp(self, node: ast.BinOp):
        left, right = self.eval(node.left), self.eval(node.right)
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.refuse(node, "the operator `@`")
        return self.binop(node, op, left, right)

    def binop(self, node: ast.AST, op, left, right):
        for v in (left, right):
            if not isinstance(v, PLAIN):
                raise self.refuse(node, f"arithmetic on {describe(v)}")
        if isinstance(left, str) and op in (operator.mod, operator.imod):
            return self.percent(node, left, right)
        self.check_size(node, op, left, right)
        try:
            return self.made(node, op(left, right))
        except Exception as e:  # noqa: BLE001
            raise self.fails(node, e) from e

    def check_size(self, node: ast.AST, op, left, right) -> None:
        """Refuse what would make a huge value (`"x" * 10**9`, `2 ** 10**9`) rather than make it."""
        huge = False
        if op in (operator.mul, operator.imul):
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(n, int) and len(seq) * n > MAX_ITEMS:
                    huge = True
            if isinstance(left, int) and isinstance(right, int):
                huge = left.bit_length() + right.bit_length() > MAX_BITS
        elif op in (operator.pow, operator.ipow, operator.lshift):
            if isinstance(left, int) and isinstance(right, int) and right > 0:
                if op is operator.lshift:
                    huge = left != 0 and right + left.bit_length() > MAX_BITS
                else:
                    huge = abs(left) > 1 and right * abs(left).bit_length() > MAX_BITS
        if huge:
            raise self.refuse(node, "a value this large")

    def percent(self, node: ast.AST, fmt: str, args):
        if not deep_plain(args):
            raise self.refuse(node, f"`%` formatting of {describe(args)}")
        if re.search(r"%(\([^)]*\))?[-#0 +]*(\*|\d*\.\*)", fmt):
            raise self.refuse(node, "a `*` width in `%` formatting")
        for width in re.findall(r"%[-#0 +]*(\d*)(?:\.(\d+))?", fmt):
            if any(w and int(w) > 10_000 for w in width):
                raise self.refuse(node, "a field this wide")
        try:
            return self.made(node, fmt % args)
        except Exception as e:  # noqa: BLE001
            raise self.fails(node, e) from e

    def e_UnaryOp(self, node: ast.UnaryOp):
        value = self.eval(node.operand)
        if not isinstance(value, PLAIN):
            raise self.refuse(node, f"arithmetic on {describe(value)}")
        try:
            return UNOPS[type(node.op)](value)
        except Exception as e:  # noqa: BLE001
            raise self.fails(node, e) from e

    def e_BoolOp(self, node: ast.BoolOp):
        value = None
        for v in node.values:
            value = self.eval(v)
            if not isinstance(value, (*PLAIN, DimValue)):
                raise self.refuse(v, f"the truth of {describe(value)}")
            if isinstance(node.op, ast.And) != bool(value):
                return value
        return value

    def e_Compare(self, node: ast.Compare):
        left = self.eval(node.left)
        for op, comp in zip(node.ops, node.comparators):
            right = self.eval(comp)
            if not isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq):
                for v in (left, right):
                    if not isinstance(v, PLAIN):
                        raise self.refuse(node, f"a comparison of {describe(v)}")
            try:
                ok = CMPOPS[type(op)](left, right)
            except Exception as e:  # noqa: BLE001
                raise self.fails(node, e) from e
            if not ok:
                return False
            left = right
        return True

    def e_IfExp(self, node: ast.IfExp):
        return self.eval(node.body) if self.truth(node.test) else self.eval(node.orelse)

    def e_JoinedStr(self, node: ast.JoinedStr) -> str:
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(v.value)
                continue
            value = self.eval(v.value)
            if not deep_plain(value):
                raise self.refuse(v, f"formatting {describe(value)}")
            value = {-1: lambda x: x, 115: str, 114: repr, 97: ascii}[v.conversion](value)
            spec = self.e_JoinedStr(v.format_spec) if v.format_spec else ""
            parts.append(self.format_value(v, value, spec))
        return self.made(node, "".join(parts))

    def format_value(self, node: ast.AST, value, spec: str) -> str:
        if any(int(w) > 10_000 for w in re.findall(r"\d+", spec)):
            raise self.refuse(node, "a field this wide")
        try:
            return self.made(node, format(value, spec))
        except Exception as e:  # noqa: BLE001
            raise self.fails(node, e) from e

    def e_Subscript(self, node: ast.Subscript):
        obj, key = self.eval(node.value), self.index(node.slice)
        if not isinstance(obj, PLAIN):
            raise self.refuse(node, f"an item of {describe(obj)}")
        try:
            return obj[key]
        except Exception as e:  # noqa: BLE001
            raise self.fails(node, e) from e

    def index(self, node: ast.expr):
        if isinstance(node, ast.Slice):
            parts = [self.eval(p) if p is not None else None for p in (node.lower, node.upper, node.step)]
            return slice(*parts)
        return self.eval(node)

    def e_Attribute(self, node: ast.Attribute):
        obj = self.eval(node.value)
        if isinstance(obj, Special) and obj.name == "Dim" and node.attr == "Types":
            return Special("Dim.Types")
        if isinstance(obj, Special) and obj.name == "Dim.Types" and node.attr in DIM_KINDS:
            return DimKind(node.attr)
        if isinstance(obj, DimValue) and node.attr == "dimension":
            return obj.dimension
        raise self.refuse(node, f"the attribute `.{node.attr}` of {describe(obj)}")

    def comprehension(self, node, generators: list[ast.comprehension], emit) -> None:
        """Run `emit` for each element of the generators, their names in a scope of their own."""
        saved = dict(self.env)

        def loop(i: int) -> None:
            if i == len(generators):
                emit()
                return
            g = generators[i]
            if g.is_async:
                raise self.refuse(node, "an `async` comprehension")
            for item in self.iterate(g.iter, self.eval(g.iter)):
                self.assign(g.target, item)
                if all(self.truth(c) for c in g.ifs):
                    loop(i + 1)

        try:
            loop(0)
        finally:
            bound = {n.id for g in generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            for name in bound:
                if name in saved:
                    self.env[name] = saved[name]
                else:
                    self.env.pop(name, None)

    def e_ListComp(self, node: ast.ListComp) -> list:
        out = []
        self.comprehension(node, node.generators, lambda: out.append(self.eval(node.elt)))
        return out

    e_GeneratorExp = e_ListComp  # consumed by a builtin at once

    def e_DictComp(self, node: ast.DictComp) -> dict:
        out = {}

        def emit():
            key = self.eval(node.key)
            try:
                out[key] = self.eval(node.value)
            except TypeError as e:
                raise self.fails(node.key, e) from e

        self.comprehension(node, node.generators, emit)
        return out

    def iterate(self, node: ast.AST, value) -> list:
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, list | tuple | str | range) or type(value).__name__ in {
            "dict_keys",
            "dict_values",
            "dict_items",
            "enumerate",
            "zip",
            "list_reverseiterator",
        }:
            items = list(value)
            if len(items) > MAX_ITEMS:
                raise self.refuse(node, "a value this large")
            return items
        raise self.refuse(node, f"a loop over {describe(value)}")

    # -- calls -----------------------------------------------------------------------------------

    def arguments(self, node: ast.Call) -> tuple[list, dict]:
        args, kwargs = [], {}
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.iterate(a, self.eval(a.value)))
            else:
                args.append(self.eval(a))
        for k in node.keywords:
            value = self.eval(k.value)
            if k.arg is None:
                if not isinstance(value, dict) or not all(isinstance(x, str) for x in value):
                    raise self.fails(k.value, TypeError("argument after ** must be a mapping with string keys"))
                kwargs.update(value)
            else:
                kwargs[k.arg] = value
        return args, kwargs

    def e_Call(self, node: ast.Call):
        if isinstance(node.func, ast.Attribute):
            obj = self.eval(node.func.value)
            args, kwargs = self.arguments(node)
            return self.method(node, obj, node.func.attr, args, kwargs)
        f = self.name(node.func, called=True) if isinstance(node.func, ast.Name) else self.eval(node.func)
        args, kwargs = self.arguments(node)
        if isinstance(f, Special) and f.name in ("Dim", "FeatureDim", "SpatialDim"):
            return self.make_dim(node, f.name, args, kwargs)
        if f is builtins.eval and len(args) == 1 and not kwargs and isinstance(args[0], str):
            try:  # `eval(config.value("zips", "None"))`: of a string that is a Python literal, its value
                return self.made(node, ast.literal_eval(args[0].strip()))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise self.refuse(node.func, f"`eval` of {args[0][:40]!r} (of a Python literal it is)") from None
        if not any(f is b for b in SAFE_BUILTINS.values()):
            raise self.refuse(node.func, f"a call of {describe(f)}")
        if f is range:
            try:
                n = len(range(*args))
            except Exception as e:  # noqa: BLE001
                raise self.fails(node, e) from e
            if n > MAX_ITEMS:
                raise self.refuse(node, "a value this large")
        if f is sum and (len(args) > 1 or kwargs) and not isinstance((args[1:] or [*kwargs.values()])[0], int | float):
            raise self.refuse(node, "`sum` with a start other than a number")
        if f is str and not deep_plain(args):
            raise self.refuse(node, f"formatting {describe(args[0])}")
        for v in (*args, *kwargs.values()):
            if not deep_plain(v) and f not in (list, tuple, dict, len, isinstance, enumerate, zip, reversed):
                raise self.refuse(node, f"`{f.__name__}` of {describe(v)}")
        try:
            result = self.made(node, f(*args, **kwargs))
        except Exception as e:  # noqa: BLE001
            raise self.fails(node, e) from e
        if f in (enumerate, zip, reversed):
            result = list(result)
        return result

    def method(self, node: ast.Call, obj, name: str, args: list, kwargs: dict):
        if isinstance(obj, Special) and obj.name == "config":
            if name not in CONFIG_METHODS:
                raise self.refuse(node.func, f"`config.{name}(...)`")
            try:
                return getattr(self, "config_" + name)(*args, **kwargs)
            except Exception as e:  # noqa: BLE001
                raise self.fails(node, e) from e
        if isinstance(obj, DimValue) and name == "copy":
            extra = set(kwargs) - {"same_as_self", "description", "kind", "match_priority"}
            if args or extra:
                raise self.refuse(node, "`copy` of a dim tag with these arguments")
            return DimValue("copy", (), kwargs, of=obj)
        allowed = next((m for t, m in METHODS.items() if isinstance(obj, t)), set())
        if name not in allowed:
            raise self.refuse(node.func, f"a call of `.{name}` on {describe(obj)}")
        if isinstance(obj, str) and name == "format":
            return self.str_format(node, obj, args, kwargs)
        if isinstance(obj, str) and name == "replace" and len(args) >= 2 and all(isinstance(a, str) for a in args[:2]):
            count = obj.count(args[0]) if args[0] else len(obj) + 1
            if count * len(args[1]) > MAX_ITEMS:
                raise self.refuse(node, "a value this large")
        try:
            result = self.made(node, getattr(obj, name)(*args, **kwargs))
        except Exception as e:  # noqa: BLE001
            raise self.fails(node, e) from e
        return list(result) if name in ("items", "keys", "values") else result

    def str_format(self, node: ast.Call, fmt: str, args: list, kwargs: dict) -> str:
        try:
            fields = list(string.Formatter().parse(fmt))
        except ValueError as e:
            raise self.fails(node, e) from e
        for _, name, spec, _ in fields:
            if name is not None and ("." in name or "[" in name):
                raise self.refuse(node, f"the format field `{{{name}}}` (attributes and items)")
            if spec and ("{" in spec or any(int(w) > 10_000 for w in re.findall(r"\d+", spec))):
                raise self.refuse(node, f"the format spec `{spec}`")
        for v in (*args, *kwargs.values()):
            if not deep_plain(v):
                raise self.refuse(node, f"formatting {describe(v)}")
        try:
            return self.made(node, fmt.format(*args, **kwargs))
        except Exception as e:  # noqa: BLE001
            raise self.fails(node, e) from e

    def make_dim(self, node: ast.Call, ctor: str, args: list, kwargs: dict) -> DimValue:
        """`Dim(...)`; `FeatureDim`/`SpatialDim` as RETURNN defines them (a `Dim` of that kind)."""
        bad = set(kwargs) - DIM_OPTIONS
        if bad:
            raise self.refuse(node, f"`{ctor}(...)` with `{sorted(bad)[0]}=` (only {', '.join(sorted(DIM_OPTIONS))})")
        if ctor == "Dim":
            if len(args) > 1:
                raise self.refuse(node, "`Dim(...)` with more than one positional argument")
        else:
            names = ["description", "dimension"]
            if len(args) > 2 or (ctor == "FeatureDim" and len(args) + ("dimension" in kwargs) < 2):
                raise self.fails(node, TypeError(f"{ctor}() takes a description and a dimension"))
            kwargs = {
                "kind": DimKind("Feature" if ctor == "FeatureDim" else "Spatial"),
                **dict(zip(names, args)),
                **kwargs,
            }
            kwargs.setdefault("dimension", None)
            args = []
        dimension = args[0] if args else kwargs.get("dimension")
        if "dimension" in kwargs and args:
            raise self.fails(node, TypeError("Dim() got multiple values for argument 'dimension'"))
        if not (dimension is None or (isinstance(dimension, int) and not isinstance(dimension, bool))):
            raise self.refuse(node, f"a dim tag of dimension {describe(dimension)} (a number or None)")
        for k in ("name", "description"):
            if kwargs.get(k) is not None and not isinstance(kwargs[k], str):
                raise self.refuse(node, f"a dim tag's `{k}` that is not a string")
        if "kind" in kwargs and not isinstance(kwargs["kind"], DimKind):
            raise self.refuse(node, "a dim tag's `kind` other than `Dim.Types.<kind>`")
        return DimValue("Dim", tuple(args), kwargs)


def _construct(node: ast.AST) -> str:
    names = {
        "Lambda": "a `lambda`",
        "NamedExpr": "an assignment expression (`:=`)",
        "Await": "`await`",
        "Yield": "`yield`",
        "YieldFrom": "`yield from`",
        "SetComp": "a set comprehension",
        "Set": "a set",
        "Starred": "`*` here",
    }
    return names.get(type(node).__name__, f"a `{type(node).__name__}` expression")
