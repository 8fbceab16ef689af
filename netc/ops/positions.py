"""`range_over(dim)`: the positions 0, 1, ... along a dim (iota), for positional encodings.

Over a static dim the result is [dim]. Over a dynamic dim it is [batch, dim]: each sequence's
own positions 0 .. n-1 (its padded frames are padding like any other value's), so that a
value over the dim always has each sequence's lengths (returned, reduced, stacked). RETURNN's
`range_in_axis` (and rf's `range_over_dim`) give [dim] alone, the batch's longest length;
netc adds it to zeros [batch, dim] in a `subnetwork`.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.base import OpDef, OutType, register

_DTYPES = ("int32", "float32")


@register
class RangeOver(OpDef):
    """`range_over(dim, dtype="int32")`: 0 .. size-1 (int32 or float32) over [dim], or over
    [batch, dim] for a dynamic dim."""

    name = fn_name = "range_over"
    tensors = ()

    def api(self, dim, dtype="int32"):
        pass

    def infer(self, dt, args, attrs):
        d, dtype = attrs["dim"], attrs["dtype"]
        if not isinstance(d, str) or d not in dt.dims or dt[d].kind == "batch":
            raise DimError("`range_over(dim)` takes a dim other than batch")
        if dtype not in _DTYPES:
            raise DimError(f"`range_over` dtype must be 'int32' or 'float32', got {dtype!r}")
        dt.check_lengths([d], self.fn_name)
        return [OutType(("batch", d) if dt[d].kind == "dynamic" else (d,), dtype)]

    def returnn(self, ctx, op):
        d, dtype = op.attrs["dim"], op.attrs["dtype"]
        if not ctx.is_dynamic(d):
            return {"class": "range_in_axis", "from": [], "axis": ctx.dim(d), "dtype": dtype}
        zeros = {"class": "constant", "value": 0 if dtype == "int32" else 0.0, "dtype": dtype}
        zeros["shape"] = [ctx.dim("batch"), ctx.dim(d)]
        dep = ctx.dim_source(d)
        if dep:  # a dim made by an op or a loop gets its lengths when that layer is built: first
            zeros["shape_deps"] = [f"base:{dep}"]
        sub = {
            "zeros": zeros,
            "range": {"class": "range_in_axis", "from": "zeros", "axis": ctx.dim(d), "dtype": dtype},
            "output": {"class": "combine", "kind": "add", "from": ["zeros", "range"]},
        }
        return {"class": "subnetwork", "from": [], "subnetwork": sub}

    def torch(self, ctx, op):
        d = op.attrs["dim"]
        dtype = "torch.long" if op.attrs["dtype"] == "int32" else ctx.float_dtype
        code = f"torch.arange({ctx.size(d)}, dtype={dtype}, device={ctx.device})"
        return f"{code}.expand({ctx.size('batch')}, {ctx.size(d)})" if ctx.is_dynamic(d) else code

    def eager(self, ctx, args, attrs, outs):
        import torch

        d = attrs["dim"]
        dtype = torch.long if attrs["dtype"] == "int32" else torch.float32
        r = torch.arange(ctx.size(d), dtype=dtype)
        return r.expand(ctx.size("batch"), ctx.size(d)) if len(outs[0].dims) == 2 else r
