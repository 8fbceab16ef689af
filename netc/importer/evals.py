"""`eval` layers: the `eval` string parsed with `ast` (never evaluated) and mapped to netc
expressions. Only a restricted language is understood: `source(i)`, numbers, `+ - * / **`
(a number as exponent), unary minus, the TF functions of `UNARY`, `BINARY`, `SOFTMAX` and RETURNN's
`safe_log`; anything else is a
refusal naming the layer and the part of the string it does not understand."""

from __future__ import annotations

import ast

import libcst as cst

from netc.importer.syntax import Expr, call, num
from netc.importer.values import Refused, Val, feature

# TF function (as written after `tf.`) -> netc function of one tensor
UNARY = {
    "tanh": "tanh",
    "nn.tanh": "tanh",
    "math.tanh": "tanh",
    "sigmoid": "sigmoid",
    "nn.sigmoid": "sigmoid",
    "math.sigmoid": "sigmoid",
    "exp": "exp",
    "math.exp": "exp",
    "log": "log",
    "math.log": "log",
    "sqrt": "sqrt",
    "math.sqrt": "sqrt",
    "abs": "abs",
    "math.abs": "abs",
    "sin": "sin",
    "math.sin": "sin",
    "cos": "cos",
    "math.cos": "cos",
    "nn.relu": "relu",
    "nn.silu": "silu",
    "nn.swish": "silu",
    "stop_gradient": "stop_gradient",
}
BINARY = {"maximum": "maximum", "math.maximum": "maximum", "minimum": "minimum", "math.minimum": "minimum"}
SOFTMAX = {"nn.softmax": "softmax", "nn.log_softmax": "log_softmax"}  # over the feature dim (TF's last axis)
_BINOPS = {ast.Add: (cst.Add, 1), ast.Sub: (cst.Subtract, 1), ast.Mult: (cst.Multiply, 2), ast.Div: (cst.Divide, 2)}
_POW = 4


class EvalMapper:
    """One `eval` string of layer `full` over the values `srcs` (`source(i)`)."""

    def __init__(self, imp, full: str, code: str, srcs: list[Val], shown: str | None = None):
        self.imp, self.full, self.code, self.srcs = imp, full, code, srcs
        self.shown = shown or repr(code)  # how errors quote the eval (a config function's: what it computes)

    def refuse(self, what: str) -> Refused:
        return Refused(self.full, "eval", f"eval {self.shown}: {what} not supported")

    def run(self) -> tuple[Expr, bool]:
        """The expression and whether it is a tensor (not a plain number)."""
        try:
            tree = ast.parse(self.code.strip(), mode="eval")
        except SyntaxError as e:
            raise Refused(self.full, "eval", f"eval {self.shown} is not a Python expression ({e.msg})") from None
        expr, prec, is_tensor = self.expr(tree.body)
        if not is_tensor:
            raise self.refuse("an expression that reads no `source(i)`")
        return expr, is_tensor

    def expr(self, node: ast.AST) -> tuple[Expr, int, bool]:
        """(syntax, its precedence, whether it is a tensor)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return num(node.value), 9 if node.value >= 0 else 3, False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner, prec, t = self.expr(node.operand)
            if isinstance(node.op, ast.UAdd):
                return inner, prec, t
            return cst.UnaryOperation(cst.Minus(), _paren(inner, prec < 3)), 3, t
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            op, prec = _BINOPS[type(node.op)]
            (a, pa, ta), (b, pb, tb) = self.expr(node.left), self.expr(node.right)
            return cst.BinaryOperation(_paren(a, pa < prec), op(), _paren(b, pb <= prec)), prec, ta or tb
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            return self.pow(node.left, node.right)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.refuse(f"`{ast.unparse(node)}`")

    def pow(self, base: ast.AST, exponent: ast.AST) -> tuple[Expr, int, bool]:
        a, pa, ta = self.expr(base)
        b, pb, tb = self.expr(exponent)
        if tb or not ta:
            raise self.refuse(f"`{ast.unparse(base)} ** {ast.unparse(exponent)}` (a tensor to a number's power is)")
        return cst.BinaryOperation(_paren(a, pa <= _POW), cst.Power(), _paren(b, pb < 9)), _POW, True

    def call(self, node: ast.Call) -> tuple[Expr, int, bool]:
        fn = ast.unparse(node.func)
        if fn == "source":
            return self.source(node), 9, True
        if fn == "safe_log" and len(node.args) == 1 and not node.keywords:
            return self.safe_log(node.args[0]), 9, True
        if not fn.startswith("tf.") or node.keywords:
            raise self.refuse(f"`{ast.unparse(node)}`")
        fn, args = fn[3:], node.args
        if fn in UNARY and len(args) == 1:
            arg = self.tensor(args[0])
            self.imp.imports.add(UNARY[fn])
            return call(UNARY[fn], arg), 9, True
        if fn in BINARY and len(args) == 2:
            (a, _, ta), (b, _, tb) = self.expr(args[0]), self.expr(args[1])
            if not (ta or tb):
                raise self.refuse(f"`{ast.unparse(node)}` of two numbers")
            self.imp.imports.add(BINARY[fn])
            return call(BINARY[fn], a, b), 9, True
        if fn in ("clip_by_value", "math.clip_by_value") and len(args) == 3:
            x = self.tensor(args[0])
            lo, hi = (self.number(a) for a in args[1:])
            self.imp.imports.add("clip")
            return call("clip", x, num(lo), num(hi)), 9, True
        if fn in ("square", "math.square") and len(args) == 1:
            return self.pow(args[0], ast.Constant(2))
        if fn in ("pow", "math.pow") and len(args) == 2:
            return self.pow(args[0], args[1])
        if fn in SOFTMAX and len(args) == 1:
            src = self.tensor_val(args[0])
            self.imp.imports.add(SOFTMAX[fn])
            axis = self.imp.dim(feature(src, self.imp.dims))
            return call(SOFTMAX[fn], self.tensor(args[0]), axis=axis), 9, True
        raise self.refuse(f"`tf.{fn}` with {len(args)} argument{'s' if len(args) != 1 else ''}")

    def safe_log(self, arg: ast.AST) -> Expr:
        """RETURNN's `safe_log`: of a softmax, its log-softmax (of the logits); else log(max(x, 1e-20))."""
        if isinstance(arg, ast.Call) and ast.unparse(arg.func) == "source":
            val = self.srcs[self.source_index(arg)]
            if val.logits is not None:
                self.imp.imports.add("log_softmax")
                return call("log_softmax", val.logits.tensor(), axis=self.imp.dim(feature(val, self.imp.dims)))
        x = self.tensor(arg)
        self.imp.imports |= {"log", "maximum"}
        return call("log", call("maximum", x, num(1e-20)))

    def source(self, node: ast.Call) -> Expr:
        return self.srcs[self.source_index(node)].tensor()

    def source_index(self, node: ast.Call) -> int:
        kw = {k.arg: k.value for k in node.keywords}
        ok_kw = all(k == "auto_convert" and isinstance(v, ast.Constant) and v.value is True for k, v in kw.items())
        if len(node.args) != 1 or not ok_kw or not isinstance(node.args[0], ast.Constant):
            raise self.refuse(f"`{ast.unparse(node)}` (`source(i)` with a number i is)")
        i = node.args[0].value
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(self.srcs):
            raise Refused(self.full, "eval", f"eval {self.shown}: `source({i!r})` but it has {len(self.srcs)} sources")
        return i

    def tensor_val(self, node: ast.AST) -> Val:
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "source":
            return self.srcs[self.source_index(node)]
        raise self.refuse(f"`{ast.unparse(node)}` here (`source(i)` is)")

    def tensor(self, node: ast.AST) -> Expr:
        expr, _, is_tensor = self.expr(node)
        if not is_tensor:
            raise self.refuse(f"a number `{ast.unparse(node)}` where a tensor is expected")
        return expr

    def number(self, node: ast.AST) -> float:
        neg = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
        inner = node.operand if neg else node
        if (
            isinstance(inner, ast.Constant)
            and isinstance(inner.value, int | float)
            and not isinstance(inner.value, bool)
        ):
            return -float(inner.value) if neg else float(inner.value)
        raise self.refuse(f"`{ast.unparse(node)}` (a number is expected)")


def _paren(e: Expr, need: bool) -> Expr:
    if not need:
        return e
    return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
