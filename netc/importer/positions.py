"""An `eval` layer whose config function computes positions from its sources' lengths: the latent
attention configs' linear alignment (`"eval": t_linear`, a `choice` target in training), decoder
step i of N labels over T encoder frames at frame round((i + 1) * max(T - 1, 0) / max(N, 1)), at most
T - 1.

The function is read from the config's syntax (never run), statement by statement, over what it
reads of its sources as `source(i, as_data=True)`: each sequence's length (`get_sequence_lengths()`)
and the positions along its time axis (`tf.range(tf.shape(x.placeholder)[x.time_dim_axis])`).
TensorFlow's arithmetic on those (casts, `maximum`/`minimum`, `round`, comparisons, `where_bc`,
`expand_dims`, which netc's named dims make no difference) becomes netc's. A result clipped to
a source's last frame (`minimum(x, lengths - 1)`) is positions in that source's frames: labels
whose class dim is its time dim. Anything else in the function is a refusal naming it."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from netc.importer.config_eval import _OBJECT_FUNCTION, _parsed
from netc.importer.dims import BATCH
from netc.importer.syntax import Expr, binop, call, literal, name, num
from netc.importer.values import Refused, Val

_FLOAT, _INT = "float32", "int32"


@dataclass(frozen=True)
class _Src:
    """`source(i, as_data=True)`: what the function reads of it (lengths, positions)."""

    i: int


@dataclass(frozen=True)
class _Shape:
    i: int  # `tf.shape(source(i).placeholder)`


@dataclass(frozen=True)
class _Axis:
    i: int
    which: str  # "batch" or "time": `x.batch_dim_axis`, `x.time_dim_axis`


@dataclass(frozen=True)
class _Len:
    i: int  # the longest length along source i's time axis (`tf.shape(...)[time axis]`)


@dataclass
class _T:
    """A tensor: netc syntax, its dims, dtype; `last_of`: a source whose last frame bounds it."""

    expr: Expr
    dims: tuple[str, ...]
    dtype: str
    last_of: int | None = None


def positions_eval(imp, d: dict, full: str, sources: Callable[[], list[Val]]) -> tuple[Expr, tuple, str | None] | None:
    """The netc value of `eval` layer `d` whose config function computes positions from lengths
    (its expression, dims, class dim), None where the `eval` is not such a function (`sources`
    gives the layer's sources, read only for such a function)."""
    code = d.get("eval")
    if not isinstance(code, dict) or not isinstance(code.get("__object__"), str):
        return None
    m = _OBJECT_FUNCTION.match(code["__object__"])
    tree = _parsed(imp.cfg.path) if m else None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == m.group(1)), None) if tree else None
    if fn is None or "as_data" not in ast.unparse(fn) or "get_sequence_lengths" not in ast.unparse(fn):
        return None
    ev = _Lengths(imp, full, fn.name, sources())
    out = ev.run(fn)
    cls = None
    if out.last_of is not None and out.dtype == _INT:
        cls = ev.time(out.last_of)
    return out.expr, out.dims, cls


class _Lengths:
    def __init__(self, imp, full: str, fn: str, srcs: list[Val]):
        self.imp, self.full, self.fn, self.srcs = imp, full, fn, srcs
        self.env: dict[str, object] = {}

    def refuse(self, node: ast.AST, what: str) -> Refused:
        return Refused(
            self.full,
            "eval",
            f"eval {self.fn} (line {getattr(node, 'lineno', '?')}): {what} (of lengths and positions)",
        )

    def time(self, i: int) -> str:
        dyn = [x for x in self.srcs[i].dims if self.imp.dims.is_dynamic(x)]
        if len(dyn) != 1:
            raise Refused(self.full, "eval", f"eval {self.fn}: source {i} has no one time axis")
        return dyn[0]

    def run(self, fn: ast.FunctionDef) -> _T:
        for st in fn.body:
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):  # a docstring
                continue
            if isinstance(st, ast.Import | ast.ImportFrom):  # tensorflow, TFUtil's where_bc
                continue
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                self.env[st.targets[0].id] = self.expr(st.value)
                continue
            if isinstance(st, ast.Return) and st.value is not None:
                out = self.expr(st.value)
                if not isinstance(out, _T) or BATCH not in out.dims:
                    raise self.refuse(st, "a result that is not a tensor per sequence")
                return out
            raise self.refuse(st, f"the statement `{ast.unparse(st)[:60]}`")
        raise self.refuse(fn, "no `return`")

    def tensor(self, node: ast.AST) -> _T:
        v = self.expr(node)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return _T(num(v), (), _FLOAT if isinstance(v, float) else _INT)
        if not isinstance(v, _T):
            raise self.refuse(node, f"`{ast.unparse(node)[:60]}` as a tensor")
        return v

    def expr(self, node: ast.AST):  # noqa: C901 - one case per form the functions use
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.expr(node.operand)
            if isinstance(v, int | float):
                return -v
        if isinstance(node, ast.Name) and node.id in self.env:
            return self.env[node.id]
        if isinstance(node, ast.Attribute):
            base = self.expr(node.value) if not _is_tf(node.value) else None
            if isinstance(base, _Src) and node.attr in ("batch_dim_axis", "time_dim_axis"):
                return _Axis(base.i, node.attr.split("_")[0])
            if isinstance(base, _Src) and node.attr == "placeholder":
                return base
            if _is_tf(node.value) and node.attr in ("float32", "int32"):
                return node.attr
            raise self.refuse(node, f"`{ast.unparse(node)[:60]}`")
        if isinstance(node, ast.Subscript):
            base, idx = self.expr(node.value), self.expr(node.slice)
            if isinstance(base, _Shape) and isinstance(idx, _Axis) and idx.i == base.i:
                return _Len(base.i) if idx.which == "time" else ("batch", base.i)
            raise self.refuse(node, f"`{ast.unparse(node)[:60]}`")
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return self.arith(node, _BIN[type(node.op)], node.left, node.right)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.refuse(node, f"`{ast.unparse(node)[:60]}`")

    def arith(self, node: ast.AST, op: str, left: ast.AST, right: ast.AST) -> _T:
        a, b = self.tensor(left), self.tensor(right)
        dtype = _FLOAT if _FLOAT in (a.dtype, b.dtype) or op == "/" else _INT
        if a.dtype != b.dtype and not (a.dims == () or b.dims == ()):
            raise self.refuse(node, "arithmetic of an int and a float tensor (TensorFlow rejects it)")
        last = a.last_of if op == "-" and b.dims == () and _is_one(b.expr) else None
        return _T(binop(op, a.expr, b.expr), _union(a.dims, b.dims), dtype, last)

    def call(self, node: ast.Call):  # noqa: C901 - one case per call the functions make
        fn = ast.unparse(node.func)
        args, kw = node.args, {k.arg: k.value for k in node.keywords}
        if fn == "source" and args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, int):
            i = args[0].value
            if not (0 <= i < len(self.srcs)) or not _true(kw.get("as_data")):
                raise self.refuse(node, "`source(i)` other than `as_data=True` of a source")
            return _Src(i)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get_sequence_lengths" and not args:
            src = self.expr(node.func.value)
            if not isinstance(src, _Src):
                raise self.refuse(node, "lengths of a value that is not a source")
            t = self.time(src.i)
            self.imp.imports |= {"full", "reduce_sum"}
            ones = call("full", name(BATCH), self.imp.dim(t), value=num(1), dtype=literal(_INT))
            return _T(call("reduce_sum", ones, axis=self.imp.dim(t)), (BATCH,), _INT, src.i)
        if fn == "tf.shape" and len(args) == 1:
            src = self.expr(args[0])
            if isinstance(src, _Src):
                return _Shape(src.i)
        if fn == "tf.range" and len(args) == 1:
            n = self.expr(args[0])
            if isinstance(n, _Len):  # each sequence's positions along its time axis (padding: padding)
                t = self.time(n.i)
                self.imp.imports.add("range_over")
                return _T(call("range_over", self.imp.dim(t)), (BATCH, t), _INT)
        if fn == "tf.expand_dims" and args:  # netc's dims are named: broadcasting needs no new axis
            return self.tensor(args[0])
        if fn == "tf.cast" and len(args) == 2:
            x, dtype = self.tensor(args[0]), self.expr(args[1])
            if dtype in (_FLOAT, _INT):
                self.imp.imports.add("cast")
                return _T(call("cast", x.expr, literal(dtype)), x.dims, dtype, x.last_of if dtype == x.dtype else None)
        if fn in ("tf.maximum", "tf.minimum") and len(args) == 2:
            a, b = self.tensor(args[0]), self.tensor(args[1])
            if a.dtype != b.dtype and a.dims and b.dims:
                raise self.refuse(node, f"`{fn}` of an int and a float tensor (TensorFlow rejects it)")
            op = fn[3:]
            self.imp.imports.add(op)
            # clipped to a source's last frame: positions in its frames
            last = b.last_of if op == "minimum" else None
            last = a.last_of if op == "minimum" and last is None else last
            dtype = _FLOAT if _FLOAT in (a.dtype, b.dtype) else _INT
            return _T(call(op, a.expr, b.expr), _union(a.dims, b.dims), dtype, last)
        if fn == "tf.round" and len(args) == 1:
            x = self.tensor(args[0])
            self.imp.imports.add("round")
            return _T(call("round", x.expr), x.dims, x.dtype)
        if fn == "tf.less" and len(args) == 2:
            a, b = self.tensor(args[0]), self.tensor(args[1])
            return _T(
                cst.Comparison(a.expr, [cst.ComparisonTarget(cst.LessThan(), b.expr)]), _union(a.dims, b.dims), "bool"
            )
        if fn in ("where_bc", "tf.where") and len(args) == 3:
            c, a, b = (self.tensor(x) for x in args)
            if c.dtype != "bool":
                raise self.refuse(node, "`where_bc` of a condition that is not bool")
            self.imp.imports.add("where")
            last = a.last_of if b.dims == () and _is_zero(b.expr) else None  # a position, or frame 0
            return _T(call("where", c.expr, a.expr, b.expr), _union(c.dims, a.dims, b.dims), a.dtype, last)
        raise self.refuse(node, f"`{ast.unparse(node)[:60]}`")


_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def _is_tf(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "tf"


def _true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _is_one(e: Expr) -> bool:
    return isinstance(e, cst.Integer) and e.value == "1"


def _is_zero(e: Expr) -> bool:
    return isinstance(e, cst.Integer | cst.Float) and float(e.value) == 0.0


def _union(*dims: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for ds in dims:
        out += [x for x in ds if x not in out]
    return tuple(sorted(out, key=lambda x: x != BATCH))
