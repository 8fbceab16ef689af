"""`sin`, `cos`, `logsumexp` and `one_hot`: the elementwise and reduction pieces of
sinusoidal positional encodings and of attention/decoder scores.

`logsumexp` over a dynamic dim leaves each sequence's padded frames out, as `softmax` does
(RETURNN's `reduce` layer masks them with the dtype's lowest value; torch masks with -inf).
`one_hot(labels)` is float32 over the labels' class dim; RETURNN has no layer of its own for
it, so it is an `eval` of `tf.one_hot` whose `out_type` drops the sparse dim and adds the
class dim.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.naming import Code
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, register
from netc.ops.defs import _dims_attr, _Unary
from netc.ops.reductions import _Reduce


@register
class Sin(_Unary):
    """`sin(x)`: float, elementwise; RETURNN `activation` "sin" (tf.sin)."""

    name = fn_name = "sin"
    activation = "sin"
    torch_fn = "torch.sin"


@register
class Cos(_Unary):
    """`cos(x)`: float, elementwise; RETURNN `activation` "cos" (tf.cos)."""

    name = fn_name = "cos"
    activation = "cos"
    torch_fn = "torch.cos"


@register
class LogSumExp(_Reduce):
    """`logsumexp(x, axis=d)`: log(sum(exp(x))) over a dim or a list of dims (not batch); padded
    frames of a dynamic dim are left out. RETURNN `reduce` mode "logsumexp"."""

    name = fn_name = "logsumexp"
    mode = "logsumexp"

    def infer(self, dt, args, attrs):
        if args[0].dtype != "float32":
            raise DimError(f"`logsumexp` needs a float tensor, got {args[0].dtype}")
        axes = _dims_attr(dt, attrs["axis"])
        if len(set(axes)) != len(axes):
            raise DimError("`logsumexp` reduces over each dim once")
        return super().infer(dt, args, attrs)


@register
class OneHot(OpDef):
    """`one_hot(labels)`: float32, the labels' dims plus their class dim; 1.0 at the label."""

    name = fn_name = "one_hot"

    def api(self, x):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        if x.dtype != "int32" or not x.sparse_dim:
            raise DimError(f"`one_hot` needs labels with a class dim (`Labels`, `argmax`), got {x.dtype}")
        return [OutType(dt.canonical([*x.dims, x.sparse_dim]))]

    def returnn(self, ctx, op):
        return {"class": "eval", "from": ctx.src(0), "eval": Code(ONE_HOT_HELPER), "out_type": Code(ONE_HOT_TYPE)}

    def returnn_helpers(self, op):
        return {ONE_HOT_HELPER: ONE_HOT_SOURCE, ONE_HOT_TYPE: ONE_HOT_TYPE_SOURCE}

    def torch(self, ctx, op):
        x_dims, out = ctx.in_dims(0), op.outs[0]
        (cls,) = set(out.dims) - set(x_dims)
        arange = f"torch.arange({ctx.size(cls)}, device={ctx.device})"
        expr = f"({ctx.arg(0)}.unsqueeze(-1) == {arange}).to({ctx.float_dtype})"
        return align_code(expr, (*x_dims, cls), out.dims)

    def eager(self, ctx, args, attrs, outs):
        import torch

        x, out = args[0], outs[0]
        y = (x.data.unsqueeze(-1) == torch.arange(ctx.size(x.sparse_dim))).to(torch.float32)
        return align_tensor(y, (*x.dims, x.sparse_dim), out.dims)


ONE_HOT_HELPER = "one_hot_of_labels"
ONE_HOT_SOURCE = f'''def {ONE_HOT_HELPER}(source, **_kwargs):
    """Float one-hot vectors of sparse labels, over their class dim (the last axis; a dynamic one,
    positions in an encoder's frames: as long as its longest sequence)."""
    import tensorflow as tf

    x = source(0, as_data=True, auto_convert=False)  # its own axes: the template adds the class dim last
    return tf.one_hot(x.placeholder, x.sparse_dim.get_dim_value(), dtype=tf.float32)
'''
ONE_HOT_TYPE = "one_hot_of_labels_type"
ONE_HOT_TYPE_SOURCE = f'''def {ONE_HOT_TYPE}(sources, name, **_kwargs):
    """The template of `{ONE_HOT_HELPER}`: the labels' dims plus their class dim last, float32."""
    from returnn.tensor import Tensor

    x = sources[0].output
    kwargs = x.get_kwargs(include_special_axes=False)  # its batch, beam, loop context and version
    kwargs.pop("sparse_dim", None)
    kwargs.update(name=f"{{name}}_output", dims=(*x.dim_tags, x.sparse_dim), dtype="float32")
    return Tensor(**kwargs, feature_dim=x.sparse_dim)
'''


@register
class Cumsum(OpDef):
    """`cumsum(x, axis=d)`: the running sum over a dim (not batch), each frame's value included;
    float32 or int32, the dims of `x`. Over a dynamic dim a sequence's padded frames stand after
    its valid ones, so they add nothing to a valid frame's sum (no target masks them). RETURNN
    `cumsum` layer (tf.cumsum)."""

    name = fn_name = "cumsum"

    def api(self, x, axis):
        pass

    def infer(self, dt, args, attrs):
        x, axis = args[0], attrs["axis"]
        if x.dtype not in ("float32", "int32"):
            raise DimError(f"`cumsum` needs a float32 or int32 tensor, got {x.dtype}")
        if not isinstance(axis, str) or axis not in dt.dims:
            raise DimError("`cumsum` needs `axis` to be one dim")
        if axis not in x.dims:
            raise DimError(f"`cumsum`'s axis `{axis}` is not a dim of [{', '.join(x.dims)}]")
        if dt[axis].kind == "batch":
            raise DimError("`cumsum` over the batch dim is not allowed")
        return [OutType(x.dims, x.dtype)]  # a running sum of labels is no label

    def returnn(self, ctx, op):
        return {"class": "cumsum", "from": ctx.src(0), "axis": ctx.dim(op.attrs["axis"])}

    def torch(self, ctx, op):
        return f"{ctx.arg(0)}.cumsum(dim={ctx.in_dims(0).index(op.attrs['axis'])})"

    def eager(self, ctx, args, attrs, outs):
        x = args[0]
        return x.data.cumsum(dim=x.dims.index(attrs["axis"]), dtype=x.data.dtype)
