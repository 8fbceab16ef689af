"""Ops over whole dims: the reductions (`reduce_sum`, `reduce_mean`, `reduce_max`), `dot`,
`softmax`/`log_softmax` over a dim and `seq_lens`; their dim rule, RETURNN layer, PyTorch code
and eager implementation, as every op (netc/ops/defs.py has the elementwise, creation, module
and structure ops)."""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.align import where_valid
from netc.ops.base import OpDef, OutType, register
from netc.ops.defs import _dims_attr, _float_check, dims_attr_names
from netc.ops.dot_torch import dot_bmm_code
from netc.ops.rules import union

# --- reductions ------------------------------------------------------------------------


class _Reduce(OpDef):
    """A reduction over dims (not batch); padded frames of a dynamic dim are left out. Over a
    dim where a sequence has no frame (`DimDef.may_be_empty`: a valid convolution or a pool
    longer than the sequence) every reduction gives 0 for it on every target: RETURNN's own
    rule for sum and mean (it divides by max(length, 1)), set explicitly for max and logsumexp
    (which would be -inf, NaN or the dtype's lowest depending on the engine)."""

    mode = ""  # RETURNN `reduce` mode

    def api(self, x, axis):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        axes = _dims_attr(dt, attrs["axis"])
        for a in axes:
            if a not in x.dims:
                raise DimError(f"cannot reduce over `{a}`: not a dim of [{', '.join(x.dims)}]")
            if dt[a].kind == "batch":
                raise DimError("cannot reduce over the batch dim")
        return [OutType(tuple(d for d in x.dims if d not in axes), x.dtype)]

    def returnn(self, ctx, op):
        axes = dims_attr_names(op.attrs["axis"])
        layer = {"class": "reduce", "mode": self.mode, "from": ctx.src(0), "axis": [ctx.dim(a) for a in axes]}
        empty = _empty_dims(ctx, axes)
        if not empty or self.mode in ("sum", "mean"):
            return layer
        return _zero_where_empty(ctx, layer, empty)

    def torch(self, ctx, op):
        x_dims = ctx.in_dims(0)
        axes = dims_attr_names(op.attrs["axis"])
        pos = tuple(x_dims.index(a) for a in axes)
        x = ctx.arg(0)
        dyn = [a for a in axes if ctx.is_dynamic(a)]
        empty, out = _empty_dims(ctx, axes), op.outs[0].dims
        fill = "float('-inf')" if self.mode in ("max", "logsumexp") else "0.0"
        for a in dyn:
            x = where_valid(x, ctx.mask(a, x_dims), fill)
        fn = {"sum": "sum", "mean": "sum", "max": "amax", "logsumexp": "logsumexp"}[self.mode]
        expr = f"{x}.{fn}(dim={pos if len(pos) > 1 else pos[0]})"
        if self.mode == "mean":
            counts = [
                (f"{ctx.lens(a, out)}.clamp(min=1)" if a in empty else ctx.lens(a, out)) if a in dyn else ctx.size(a)
                for a in axes
            ]
            expr = f"{expr} / ({' * '.join(counts)})"
        elif empty and self.mode != "sum":  # the sequences with no frame: 0 (`where` keeps gradients finite)
            none = " | ".join(f"({ctx.lens(a, out)} == 0)" for a in empty)
            expr = f"torch.where({none}, 0.0, {expr})"
        return expr

    def eager(self, ctx, args, attrs, outs):
        x = args[0]
        axes = dims_attr_names(attrs["axis"])
        pos = tuple(x.dims.index(a) for a in axes)
        if any(x.data.shape[p] == 0 for p in pos):  # the sequence has no frame along a dim: 0
            return x.data.sum(dim=pos)
        fn = {"sum": x.data.sum, "mean": x.data.mean, "max": x.data.amax, "logsumexp": x.data.logsumexp}
        return fn[self.mode](dim=pos)


def _empty_dims(ctx, axes: list[str]) -> list[str]:
    """The dims of `axes` along which some sequences may have no frame."""
    return [a for a in axes if ctx.is_dynamic(a) and ctx.may_be_empty(a)]


def _zero_where_empty(ctx, layer: dict, empty: list[str]) -> dict:
    """RETURNN: reduction `layer` as a subnetwork that gives 0 for the sequences with no frame
    along a dim of `empty` (a `switch` on their lengths)."""
    sub: dict = {"reduce": {**layer, "from": "data"}}
    has = []
    for i, a in enumerate(empty):
        sub[f"length_{i}"] = {"class": "length", "from": "data", "axis": ctx.dim(a)}
        sub[f"has_frames_{i}"] = {"class": "compare", "from": f"length_{i}", "kind": "greater", "value": 0}
        has.append(f"has_frames_{i}")
    if len(has) > 1:
        sub["has_frames"] = {"class": "combine", "kind": "logical_and", "from": has}
        has = ["has_frames"]
    sub["output"] = {"class": "switch", "condition": has[0], "true_from": "reduce", "false_from": 0.0}
    return {"class": "subnetwork", "from": layer["from"], "subnetwork": sub}


@register
class ReduceSum(_Reduce):
    name = fn_name = "reduce_sum"
    mode = "sum"


@register
class ReduceMean(_Reduce):
    name = fn_name = "reduce_mean"
    mode = "mean"


@register
class ReduceMax(_Reduce):
    name = fn_name = "reduce_max"
    mode = "max"


@register
class Dot(OpDef):
    """`dot(a, b, reduce=dim)`: multiply, sum over `reduce`, keep all other dims (einsum)."""

    name = fn_name = "dot"
    tensors = ("a", "b")

    def api(self, a, b, reduce):
        pass

    def infer(self, dt, args, attrs):
        _float_check("dot", args)
        axes = _dims_attr(dt, attrs["reduce"])
        for a in axes:
            for v in args:
                if a not in v.dims:
                    raise DimError(f"dot reduces over `{a}`, which is not a dim of [{', '.join(v.dims)}]")
        return [OutType(tuple(d for d in union(dt, args) if d not in axes))]

    def returnn(self, ctx, op):
        axes = dims_attr_names(op.attrs["reduce"])
        # var1/var2 "auto": without them RETURNN (behavior version 0) asserts on named reduce dims
        var1, var2 = "auto", "auto"
        a_dims, b_dims = ctx.in_dims(0), ctx.in_dims(1)
        own1 = [d for d in a_dims if d not in axes and d not in b_dims]
        own2 = [d for d in b_dims if d not in axes and d not in a_dims]
        g = ctx.em.g
        static = [x for x in dict.fromkeys([*a_dims, *b_dims]) if g.dim(x).size is not None]
        if any(
            g.dim(x).size is not None and g.dim(x).size == g.dim(y).size for x in own1 + own2 for y in static if y != x
        ):
            # "auto" (behavior version < 14) matches two static dims of one size as one (an operand's
            # own dim with the other's, or with a shared one: two dims of size 1), kept as a shared dim,
            # not multiplied out: each operand's own dims are named instead
            var1, var2 = [ctx.dim(d) for d in own1], [ctx.dim(d) for d in own2]
        layer = {
            "class": "dot",
            "from": [ctx.src(0), ctx.src(1)],
            "reduce": [ctx.dim(a) for a in axes],
            "var1": var1,
            "var2": var2,
        }
        if var2 == []:  # named (not auto): no dim of size 1 for the empty var2 (RETURNN's old default)
            layer["add_var2_if_empty"] = False
        return layer

    def torch(self, ctx, op):
        axes = dims_attr_names(op.attrs["reduce"])
        a = ctx.arg(0)
        a_dims = ctx.in_dims(0)
        for d in axes:  # padded frames may hold anything: zero them on one side
            if ctx.is_dynamic(d):
                a = where_valid(a, ctx.mask(d, a_dims), "0.0")
        bmm = dot_bmm_code(a, a_dims, ctx.arg(1), ctx.in_dims(1), axes, op.outs[0].dims)
        if bmm is not None:
            return bmm
        letters = _letters([*a_dims, *ctx.in_dims(1)])
        spec = f"{''.join(letters[d] for d in a_dims)},{''.join(letters[d] for d in ctx.in_dims(1))}"
        out = "".join(letters[d] for d in op.outs[0].dims)
        return f'torch.einsum("{spec}->{out}", {a}, {ctx.arg(1)})'

    def eager(self, ctx, args, attrs, outs):
        import torch

        letters = _letters([*args[0].dims, *args[1].dims])
        spec = f"{''.join(letters[d] for d in args[0].dims)},{''.join(letters[d] for d in args[1].dims)}"
        out = "".join(letters[d] for d in outs[0].dims)
        return torch.einsum(f"{spec}->{out}", args[0].data, args[1].data)


def _letters(dims: list[str]) -> dict[str, str]:
    uniq = list(dict.fromkeys(dims))
    return {d: "abcdefghijklmnopqrstuvwxyz"[i] for i, d in enumerate(uniq)}


class _Softmax(OpDef):
    log = False

    def api(self, x, axis):
        pass

    def infer(self, dt, args, attrs):
        _float_check(self.fn_name or self.name, args)
        axes = _dims_attr(dt, attrs["axis"])
        if len(axes) != 1 or axes[0] not in args[0].dims:
            raise DimError(f"`axis` must be one dim of [{', '.join(args[0].dims)}]")
        if dt[axes[0]].kind == "batch":
            raise DimError("softmax over the batch dim is not allowed")
        return [OutType(args[0].dims)]

    def returnn(self, ctx, op):
        axis = op.attrs["axis"]
        if ctx.is_dynamic(axis):
            return {"class": "softmax_over_spatial", "from": ctx.src(0), "axis": ctx.dim(axis), "log_space": self.log}
        if [d for d in ctx.in_dims(0) if not ctx.is_dynamic(d) and d != "batch"] != [axis]:
            # RETURNN's softmax activation acts on the feature dim: over one of several static dims
            # (a chunk's cached window beside the heads) an `eval` names the axis
            fn = "tf.nn.log_softmax" if self.log else "tf.nn.softmax"
            return {
                "class": "eval",
                "from": ctx.src(0),
                "eval": f"{fn}(source(0, auto_convert=False), "
                "axis=self.sources[0].output.get_axis_from_description(axis_dim))",
                "eval_locals": {"axis_dim": ctx.dim(axis)},
            }
        return {"class": "activation", "activation": "log_softmax" if self.log else "softmax", "from": ctx.src(0)}

    def returnn_extra(self, ctx, layer, own, op, fresh):
        """Over a dim with no frame for some sequences, RETURNN's softmax there is NaN (every
        energy masked) while it marks the padding as zeros, so a `dot` over it skips its mask: the
        padding is zeroed explicitly."""
        axis = op.attrs["axis"]
        if not ctx.is_dynamic(axis) or not ctx.may_be_empty(axis):
            return {}
        mask = {"class": "seq_len_mask", "from": layer, "axis": ctx.dim(axis), "mask_value": 0.0}
        return {0: (fresh(f"{layer}_masked"), mask)}

    def torch(self, ctx, op):
        axis = op.attrs["axis"]
        dims = ctx.in_dims(0)
        x = ctx.arg(0)
        if ctx.is_dynamic(axis):
            x = where_valid(x, ctx.mask(axis, dims), "float('-inf')")
        fn = "log_softmax" if self.log else "softmax"
        return f"torch.{fn}({x}, dim={dims.index(axis)})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        fn = torch.log_softmax if self.log else torch.softmax
        return fn(args[0].data, dim=args[0].dims.index(attrs["axis"]))


@register
class Softmax(_Softmax):
    name = fn_name = "softmax"


@register
class LogSoftmax(_Softmax):
    name = fn_name = "log_softmax"
    log = True


@register
class SeqLens(OpDef):
    """Each sequence's length along a dynamic dim: int32 [batch] (e.g. a loop's step limit)."""

    name = "seq_lens"

    def infer(self, dt, args, attrs):
        return [OutType(("batch",), "int32")]

    def returnn(self, ctx, op):
        return {"class": "length", "from": ctx.src(0), "axis": ctx.dim(op.attrs["axis"])}

    def torch(self, ctx, op):
        return ctx.seq_lens(op.attrs["axis"])

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0]
        return torch.tensor([x.data.shape[x.dims.index(attrs["axis"])]])
