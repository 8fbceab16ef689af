"""Small builders of libcst expression nodes, so that the importer writes concrete syntax (never
pastes strings together): names, calls, numbers, strings, operators."""

from __future__ import annotations

import keyword
import re

import libcst as cst

Expr = cst.BaseExpression


def name(n: str) -> cst.Name:
    return cst.Name(n)


def num(v: int | float) -> Expr:
    if isinstance(v, bool):
        return cst.Name("True" if v else "False")
    if v < 0:
        return cst.UnaryOperation(cst.Minus(), num(-v))
    return cst.Integer(str(v)) if isinstance(v, int) else cst.Float(repr(float(v)))


def string(s: str) -> cst.SimpleString:
    return cst.SimpleString(_quote(s))


def _quote(s: str) -> str:
    """A double-quoted Python literal of `s` (repr's escapes, black's quotes)."""
    r = repr(s)
    if r.startswith("'") and '"' not in s:
        r = '"' + r[1:-1].replace("\\'", "'") + '"'
    return r


def literal(v) -> Expr:
    """A Python constant (number, string, bool, None) as syntax."""
    if v is None:
        return cst.Name("None")
    if isinstance(v, str):
        return string(v)
    return num(v)


def call(fn: str | Expr, *args: Expr, **kwargs: Expr) -> cst.Call:
    func = cst.Name(fn) if isinstance(fn, str) else fn
    arg_nodes = [cst.Arg(a) for a in args]
    arg_nodes += [
        cst.Arg(v, keyword=cst.Name(k), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
        for k, v in kwargs.items()
    ]
    return cst.Call(func=func, args=arg_nodes)


_OPS = {"+": cst.Add, "-": cst.Subtract, "*": cst.Multiply, "/": cst.Divide}


def binop(op: str, a: Expr, b: Expr) -> Expr:
    return cst.BinaryOperation(left=a, operator=_OPS[op](), right=b)


_COMPARISONS = {
    "==": cst.Equal,
    "!=": cst.NotEqual,
    "<": cst.LessThan,
    "<=": cst.LessThanEqual,
    ">=": cst.GreaterThanEqual,
    ">": cst.GreaterThan,
}


def compare(op: str, a: Expr, b: Expr) -> cst.Comparison:
    """`a <op> b`."""
    return cst.Comparison(a, [cst.ComparisonTarget(_COMPARISONS[op](), b)])


def tuple_(*items: Expr) -> cst.Tuple:
    return cst.Tuple([cst.Element(i) for i in items])


def identifier(text: str) -> str:
    """`text` as a Python identifier: other characters `_`, a leading digit or underscore gets a
    letter first, keywords a trailing `_`."""
    s = re.sub(r"\W", "_", text, flags=re.ASCII).strip("_") or "layer"
    if s[0].isdigit():
        s = "l" + s
    if keyword.iskeyword(s) or keyword.issoftkeyword(s):
        s += "_"
    return s
