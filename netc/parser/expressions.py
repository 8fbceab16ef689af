"""The tracer's expressions: attributes, operators, comparisons, subscripts and slices of the
values a name can stand for while tracing (a mixin of `Tracer`, split from it for size: `self`
is the tracer)."""

from __future__ import annotations

import ast
from typing import Any

from netc.ir.dims import DimError
from netc.ops import BY_FN_NAME, REGISTRY
from netc.parser import values as V
from netc.parser.symbols import (
    BINOPS,
    COMPARE,
    DSL_SYMBOLS,
    INDEXING,
    NETC_NAMES,
    OPERATOR_SYMBOLS,
    PY_COMPARE,
    SCALARS,
    describe,
    netc_symbol,
)
from netc.suggest import did_you_mean


class Expressions:
    def attribute(self, obj: Any, node: ast.Attribute) -> Any:
        attr = node.attr
        if isinstance(obj, V.NetcModule):
            if attr not in DSL_SYMBOLS and attr not in BY_FN_NAME:
                raise self.error(node, f"`netc` has no `{attr}`" + did_you_mean(attr, NETC_NAMES))
            return netc_symbol(attr)
        if isinstance(obj, V.ModuleInstance):
            if attr in obj.attrs:
                return obj.attrs[attr]
            if obj.cls.method(attr) is not None:
                return V.BoundMethod(obj, attr)
            known = [*obj.attrs, *obj.cls.method_names()]
            raise self.error(
                node, f"module `{obj.path or obj.cls.node.name}` has no attribute `{attr}`" + did_you_mean(attr, known)
            )
        if isinstance(obj, V.OpModule):
            weights = REGISTRY[obj.op].weights
            if attr in weights:
                return V.ParamRef(obj, weights[attr], attr)
            raise self.error(
                node,
                f"module `{obj.path}` has no attribute `{attr}`"
                + (did_you_mean(attr, list(weights)) if weights else ""),
            )
        if isinstance(obj, V.TV):
            if attr == "max_seq_len":
                dyn = self.dims.dynamic(obj.dims)
                if len(dyn) != 1:
                    raise self.error(node, f"`max_seq_len` needs exactly one dynamic dim, got [{', '.join(obj.dims)}]")
                return V.SeqLen(dyn[0], obj)
            raise self.error(node, f"tensors have no attribute `{attr}`")
        if isinstance(obj, V.PyList) and attr == "append":
            return V.BoundMethod(obj, "append")
        if isinstance(obj, V.Super) and attr == "__init__":
            return V.NOOP
        if isinstance(obj, V.Foreign):
            return V.Foreign(f"{obj.name}.{attr}")
        raise self.error(node, f"unsupported attribute `{attr}`")

    def no_list_operand(self, node: ast.AST, *operands: Any) -> None:
        """Operators on a stacked list would act on a Python list in eager mode: require `stack()`."""
        for v in operands:
            if isinstance(v, V.TV) and v.from_list:
                name = v.value.name or "ys"
                raise self.error(
                    node,
                    f"`{name}` is a list appended in a loop: when the model runs eagerly it is a "
                    f"Python list, on which operators act differently; use `stack({name})` first",
                )

    def unary(self, node: ast.UnaryOp) -> Any:
        v = self.eval_expr(node.operand)
        self.no_list_operand(node, v)
        if isinstance(node.op, ast.USub):
            if isinstance(v, V.TV):
                return self.emit(REGISTRY["neg"], [v], {}, node)[0]
            if isinstance(v, (int, float)):
                return self.budget.number(-v, node)
        if isinstance(node.op, ast.UAdd) and isinstance(v, (int, float, V.TV)):
            return v
        if isinstance(node.op, ast.Not) and not isinstance(v, V.TV):
            return not v
        raise self.error(node, "unsupported unary operation")

    def binop(self, operator: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        entry = BINOPS.get(type(operator))
        if entry is None:
            raise self.error(node, f"unsupported operator `{OPERATOR_SYMBOLS.get(type(operator), '?')}`")
        opname, pyfn = entry
        num = (int, float)
        if isinstance(a, V.TV) or isinstance(b, V.TV):
            return self.tensor_binop(opname, a, b, node)
        if isinstance(a, V.DimRef) or isinstance(b, V.DimRef):
            try:
                if isinstance(a, V.DimRef) and isinstance(b, V.DimRef) and opname == "add":
                    return V.DimRef(self.dims.concat([a.name, b.name]).name)  # the dim `concat` makes
                dim, n = (a, b) if isinstance(a, V.DimRef) else (b, a)
                if opname != "mul" or not isinstance(n, int):
                    raise self.error(node, "dims combine as `n * dim` (an integer) or `a + b` (two static dims)")
                return V.DimRef(self.dims.scaled(dim.name, n).name)
            except DimError as e:
                raise self.error(node, str(e)) from None
        if isinstance(a, num) and isinstance(b, num):
            if opname in ("div", "floordiv", "mod") and b == 0:
                raise self.error(node, "division by zero")
            return self.budget.number(pyfn(a, b), node)
        if isinstance(a, V.SeqLen) or isinstance(b, V.SeqLen):
            seq, n = (a, b) if isinstance(a, V.SeqLen) else (b, a)
            if isinstance(n, int) and not isinstance(n, bool):
                check = self.budget.number
                if opname == "floordiv" and seq is a and n > 0:  # (a // m) // n is a // (m * n)
                    return V.SeqLen(seq.dim, seq.tensor, seq.scale, seq.offset, check(seq.div * n, node))
                if seq.div != 1:
                    raise self.error(node, "`max_seq_len`'s `// n` comes last (`(n * x.max_seq_len + m) // k`)")
                if opname == "mul":
                    return V.SeqLen(seq.dim, seq.tensor, check(seq.scale * n, node), check(seq.offset * n, node))
                if opname == "add":
                    return V.SeqLen(seq.dim, seq.tensor, seq.scale, check(seq.offset + n, node))
                if opname == "sub" and seq is a:
                    return V.SeqLen(seq.dim, seq.tensor, seq.scale, check(seq.offset - n, node))
            raise self.error(
                node, "`max_seq_len` takes `n * x.max_seq_len + m` with integers n, m (and `// k`, k > 0, last)"
            )
        raise self.error(node, f"unsupported operands: {describe(a)} and {describe(b)}")

    def tensor_binop(self, opname: str, a: Any, b: Any, node: ast.AST) -> V.TV:
        """`a <op> b` with a tensor on at least one side; a Python number on the other is an attribute."""
        self.no_list_operand(node, a, b)
        if opname == "sub" and any(isinstance(v, V.TV) and v.value.dtype == "bool" for v in (a, b)):
            raise self.error(node, "`-` of a bool tensor (as in torch): `cast` it to int32 or float32 first")
        if isinstance(a, V.TV) and isinstance(b, V.TV):
            if opname == "div":
                a, b = self.promoted(a, "float32", node), self.promoted(b, "float32", node)
            return self.emit(REGISTRY[opname], [a, b], {}, node)[0]
        tv, other = (a, b) if isinstance(a, V.TV) else (b, a)
        left = tv is b
        if isinstance(other, bool) or not isinstance(other, (int, float)):
            raise self.error(node, f"cannot combine a tensor with {describe(other)}")
        # torch's type promotion: a float number or `/` makes a float, an int number an int of a bool
        if isinstance(other, float) or opname == "div":
            tv = self.promoted(tv, "float32", node)
        elif tv.value.dtype == "bool":
            tv = self.promoted(tv, "int32", node)
        return self.emit(REGISTRY[opname], [tv], {"scalar": other, "scalar_left": left}, node)[0]

    def promoted(self, tv: V.TV, dtype: str, node: ast.AST) -> V.TV:
        """`tv` as `dtype` where torch promotes it to that (an explicit `cast` for every target)."""
        if tv.value.dtype == dtype or tv.value.dtype == "float32":
            return tv
        return self.emit(REGISTRY["cast"], [tv], {"dtype": dtype}, node)[0]

    def compare(self, node: ast.Compare) -> Any:
        left = self.eval_expr(node.left)
        if len(node.ops) != 1:
            raise self.error(node, "chained comparisons are not supported")
        right = self.eval_expr(node.comparators[0])
        if isinstance(left, V.TV) or isinstance(right, V.TV):
            opname = COMPARE.get(type(node.ops[0]))
            if opname is None:
                raise self.error(node, "tensors compare with == != < <= > >=")
            return self.tensor_binop(opname, left, right, node)
        fn = PY_COMPARE.get(type(node.ops[0]))
        if fn is None or not all(isinstance(v, (int, float, str, bool, type(None))) for v in (left, right)):
            raise self.error(node, "unsupported comparison")
        return fn(left, right)

    def subscript(self, node: ast.Subscript) -> Any:
        obj = self.eval_expr(node.value)
        if isinstance(node.slice, ast.Slice):  # `x[a:b]`
            return self.slice(obj, node.slice, node)
        if isinstance(node.slice, ast.Tuple):  # `x[a, b]`
            what = "a tensor takes one index" if isinstance(obj, V.TV) else f"{describe(obj)} takes one index"
            raise self.error(node, f"{what}: {INDEXING}")
        idx = self.eval_expr(node.slice)
        if isinstance(obj, V.TV):
            if isinstance(idx, V.LoopIndex):
                return self.loops.index(obj, idx, node)
            raise self.error(
                node, "tensors can only be indexed by a loop index (`x[t]` in `for t in range(x.max_seq_len)`)"
            )
        if isinstance(obj, (tuple, list)) and isinstance(idx, int):
            if not -len(obj) <= idx < len(obj):
                raise self.error(node, f"index {idx} out of range for {len(obj)} items")
            return obj[idx]
        if isinstance(obj, dict) and isinstance(idx, SCALARS) and idx in obj:
            return obj[idx]
        if isinstance(obj, V.NetcSym) and obj.name in ("Tensor", "Labels"):
            raise self.error(node, f"`{obj.name}[...]` is only for annotating network inputs")
        if isinstance(obj, dict) and isinstance(idx, SCALARS):
            raise self.error(node, f"the dict has no key {idx!r}")
        what = {tuple: "a tuple", list: "a list", dict: "a dict"}.get(type(obj)) or describe(obj)
        raise self.error(node, f"{what} cannot be indexed by {describe(idx)}: {INDEXING}")

    def slice(self, obj: Any, sl: ast.Slice, node: ast.Subscript) -> Any:
        """`obj[a:b:c]`: Python lists and tuples slice as in Python; a tensor has no slices."""
        if isinstance(obj, V.TV):
            raise self.error(node, self._tensor_slice_message(obj, sl))
        if not isinstance(obj, (tuple, list)):
            what = "a dict" if isinstance(obj, dict) else describe(obj)
            raise self.error(node, f"{what} cannot be sliced: {INDEXING}")
        bounds = [None if b is None else self.eval_expr(b) for b in (sl.lower, sl.upper, sl.step)]
        if any(b is not None and (isinstance(b, bool) or not isinstance(b, int)) for b in bounds) or bounds[2] == 0:
            raise self.error(node, "a list or tuple is sliced by integers (`parts[1:]`), with a step other than 0")
        return obj[slice(*bounds)]

    def _tensor_slice_message(self, obj: V.TV, sl: ast.Slice) -> str:
        """`y[:-1]` names no dim for its result: the error shows the `slice_frames` call that does."""
        dyn = [d for d in obj.value.dims if self.dims[d].kind == "dynamic"]
        axis = dyn[0] if len(dyn) == 1 else "<dim>"
        bounds = [f"{k}={ast.unparse(b)}" for k, b in (("start", sl.lower), ("stop", sl.upper)) if b is not None]
        call = f"slice_frames(x, axis={axis}, {', '.join([*bounds, 'out_axis=new_dim'])})"
        return (
            "a tensor cannot be sliced with `[...]` (it is indexed only by a loop index, `x[t]` in "
            f"`for t in range(x.max_seq_len)`): the result's dynamic dim needs a name; write `{call}` with "
            "`new_dim = Dim(...)` (each sequence's own frames, `y[:-1]` drops each one's last), or "
            "`shift_right(y, axis=..., value=BOS)` for a decoder's input, `pad_frames(...)` to add frames"
        )
