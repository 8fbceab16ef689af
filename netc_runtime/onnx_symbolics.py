"""ONNX forms for `netc export --format onnx` where torch's TorchScript-based exporter lacks an
op or exports it with other numbers than torch computes (registered for the opset exported)."""

from __future__ import annotations


def register(opset: int) -> None:
    import torch
    from torch.onnx._internal.torchscript_exporter.symbolic_opset9 import _floor_divide

    torch.onnx.register_custom_op_symbolic("aten::masked_fill", _masked_fill, opset)
    torch.onnx.register_custom_op_symbolic("aten::where", _where, opset)
    # `//` rounds down, on ints (sizes: `-(-n // 2)`) and tensors (lengths: `(lens - 3) // 2`) as in
    # Python; the exporter's truncates toward 0
    for op in ("aten::floordiv", "aten::floor_divide"):
        torch.onnx.register_custom_op_symbolic(op, _floor_divide, opset)
    # ops the exporter lacks (unflatten: for a tensor whose rank it does not know)
    for op, fn in [("take_along_dim", _take_along_dim), ("unflatten", _unflatten), ("gru_cell", _gru_cell)]:
        torch.onnx.register_custom_op_symbolic(f"aten::{op}", fn, opset)
    torch.onnx.register_custom_op_symbolic("aten::squeeze", _squeeze, opset)


def _squeeze(g, self, dim=None):
    """`x.squeeze(d)` as ONNX `Squeeze` of axis d (which requires size 1 when it runs): netc's
    code squeezes only a dim of size 1 that it made (`torch.bmm` of a vector, a gather of one
    frame). The exporter's own, where it does not know the size (in a loop's body), squeezes in
    an `If` whose result has no known rank, and an op after it that needs the rank fails
    (`Unsupported: ONNX export of operator dim, ... Input rank must be known`)."""
    from torch.onnx import symbolic_helper

    if dim is None:
        return g.op("Squeeze", self)
    if not symbolic_helper._is_constant(dim):
        return symbolic_helper._squeeze_helper(g, self, [dim])
    dim = symbolic_helper._get_const(dim, "i", "dim")
    rank = symbolic_helper._get_tensor_rank(self)
    if dim < 0 and rank is not None:
        dim += rank
    return symbolic_helper._squeeze_helper(g, self, [dim])


def _masked_fill(g, self, mask, value):
    """`x.masked_fill(mask, 0)` with the fill cast like `x` in the graph: the exporter's own casts
    it to `x`'s type at export time, which it does not know for a stack made in a `while` loop
    (an int64 0 then meets float frames in `Where`, which onnxruntime rejects)."""
    from torch.onnx import symbolic_helper

    value = symbolic_helper._maybe_get_scalar(value)
    if not isinstance(value, type(self)):
        value = g.op("Constant", value_t=value)
    mask = g.op("Cast", mask, to_i=9)  # bool
    value = g.op("CastLike", value, self)
    if symbolic_helper._is_bool(self):  # onnxruntime has no Where for bool: the same in logic
        return g.op("Or", g.op("And", mask, value), g.op("And", g.op("Not", mask), self))
    return g.op("Where", mask, value, self)


def _where(g, condition, self=None, other=None, _outputs=None):
    """`torch.where(mask, x, 0)` (and `torch.where(mask, 0, x)`), as the module zeroes padded
    frames: a number is cast like the tensor in the graph, for the reason `_masked_fill` gives."""
    from torch.onnx import symbolic_helper

    if self is None:  # torch.where(mask): the indices (not written by netc)
        return g.op("NonZero", condition)
    if symbolic_helper._is_constant(other) and not symbolic_helper._is_constant(self):
        other = g.op("CastLike", other, self)
    elif symbolic_helper._is_constant(self) and not symbolic_helper._is_constant(other):
        self = g.op("CastLike", self, other)
    condition = g.op("Cast", condition, to_i=9)  # bool
    if symbolic_helper._is_bool(self) or symbolic_helper._is_bool(other):  # no bool Where in onnxruntime
        return g.op("Or", g.op("And", condition, self), g.op("And", g.op("Not", condition), other))
    return g.op("Where", condition, self, other)


def _ints(g, values: list[int]):
    import torch

    return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))


def _take_along_dim(g, self, indices, dim):
    """`torch.take_along_dim(x, idx, dim)`: GatherElements on `idx` broadcast to `x`'s shape but
    along `dim` (the exporter has none); both of one rank, as the module writes them."""
    from torch.onnx import symbolic_helper

    d = symbolic_helper._get_const(dim, "i", "dim")
    shape_x, shape_i = g.op("Shape", self), g.op("Shape", indices)
    both = g.op("Max", shape_x, shape_i)  # broadcast: each size is 1 or the other's

    def around(middle):
        parts = [g.op("Slice", both, _ints(g, [0]), _ints(g, [d]))] if d != 0 else []
        parts.append(g.op("Slice", middle, _ints(g, [d]), _ints(g, [d + 1])))
        if d != -1:
            parts.append(g.op("Slice", both, _ints(g, [d + 1]), _ints(g, [2**62])))
        return g.op("Concat", *parts, axis_i=0)

    x = g.op("Expand", self, around(shape_x))
    out = g.op("GatherElements", x, g.op("Expand", indices, around(shape_i)), axis_i=d)
    rank = symbolic_helper._get_tensor_rank(self) or symbolic_helper._get_tensor_rank(indices)
    if rank is not None:  # what shape inference cannot tell through the computed shapes
        out.setType(self.type().with_sizes([None] * rank))
    return out


def _unflatten(g, self, dim, sizes):
    """`x.unflatten(dim, sizes)` as a Reshape around `dim`, for any rank (the exporter needs it known)."""
    from torch.onnx import symbolic_helper

    d = symbolic_helper._get_const(dim, "i", "dim")
    shape = g.op("Shape", self)
    parts = [g.op("Slice", shape, _ints(g, [0]), _ints(g, [d]))] if d != 0 else []
    parts.append(g.op("Cast", sizes, to_i=7))  # int64
    if d != -1:
        parts.append(g.op("Slice", shape, _ints(g, [d + 1]), _ints(g, [2**62])))
    return g.op("Reshape", self, g.op("Concat", *parts, axis_i=0))


def _gru_cell(g, x, h, w_ih, w_hh, b_ih, b_hh):
    """`torch.gru_cell` (no ONNX operator of its own): gates in torch's order r, z, n."""
    from torch.onnx import symbolic_helper

    def affine(v, w, b):
        out = g.op("MatMul", v, g.op("Transpose", w, perm_i=[1, 0]))
        return out if symbolic_helper._is_none(b) else g.op("Add", out, b)

    i_r, i_z, i_n = g.op("Split", affine(x, w_ih, b_ih), axis_i=1, outputs=3)
    h_r, h_z, h_n = g.op("Split", affine(h, w_hh, b_hh), axis_i=1, outputs=3)
    r = g.op("Sigmoid", g.op("Add", i_r, h_r))
    z = g.op("Sigmoid", g.op("Add", i_z, h_z))
    n = g.op("Tanh", g.op("Add", i_n, g.op("Mul", r, h_n)))
    return g.op("Add", n, g.op("Mul", z, g.op("Sub", h, n)))  # (1 - z) * n + z * h
