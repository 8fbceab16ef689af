"""`Bias(dims)(x)`: x plus a learned parameter over some of its static dims.

The position biases u and v of Transformer-XL attention (rf's `RelPosSelfAttention` with
`with_pos_bias=True`, the Conformer's default) are such parameters, [heads, head_feat], added to
the queries [batch, time, heads, head_feat] before their products with the keys and with the
position encodings. RETURNN: a `subnetwork` of a `variable` layer (the parameter) and a
`combine` that adds it; torch and eager: the parameter aligned to x and added.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, register


def _dims(attrs) -> tuple[str, ...]:
    d = attrs["dims"]
    return tuple(d) if isinstance(d, (tuple, list)) else (d,)


@register
class Bias(OpDef):
    """`Bias(dims)(x)`: x + b, b a parameter over `dims` (one static dim of x or a tuple of them),
    broadcast over x's other dims."""

    name = "bias"
    fn_name = "Bias"
    module = True

    def ctor(self, dims):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        dims = _dims(attrs)
        if x.dtype != "float32":
            raise DimError(f"`Bias` needs a float tensor, got {x.dtype}")
        ok = all(isinstance(d, str) and d in x.dims and dt[d].kind == "static" for d in dims)
        if not dims or not ok or len(set(dims)) != len(dims):
            raise DimError(
                f"`Bias` needs distinct static dims of the tensor [{', '.join(x.dims)}], got ({', '.join(map(str, dims))})"
            )
        return [OutType(x.dims)]

    def params(self, dt, args, attrs):
        return {"b": _dims(attrs)}

    def returnn(self, ctx, op):
        dims = _dims(op.attrs)
        init = "glorot_uniform" if self.init_of("b", dims) == "glorot" else 0.0
        # `name_scope: ""`: the variable lands in the subnetwork's scope, as `<module path>/b`
        var = {"class": "variable", "shape": [ctx.dim(d) for d in dims], "init": init, "name_scope": ""}
        sub = {"b": var, "output": {"class": "combine", "kind": "add", "from": ["data", "b"]}}
        return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": sub}

    def torch(self, ctx, op):
        return f"{ctx.arg(0)} + {align_code(ctx.param('b'), _dims(op.attrs), op.outs[0].dims)}"

    def eager(self, ctx, args, attrs, outs):
        return args[0].data + align_tensor(ctx.param("b"), _dims(attrs), args[0].dims)
