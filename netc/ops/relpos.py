"""Relative positions for self-attention (Transformer-XL style, as the Conformer's
`RelPosSelfAttention` in RETURNN's frontend uses them): `rel_positions` and `rel_shift`.

`rel_positions(axis=time, out_axis=rel_time)` makes a dim of 2n-1 frames per sequence of n
frames holding the relative positions -(n-1) .. n-1 (a key's position minus a query's, rf's
order). A sinusoidal encoding of them (`sin`/`cos` of the positions times frequencies) is
[batch, rel_time, feat]; scores of queries against it, [batch, time, rel_time, ...], are
brought to [batch, time, kv_time, ...] by `rel_shift`: frame j of query i takes the score of
relative position j - i. Each sequence uses its own length, as eager mode does running it
alone (rf builds one table over the batch's longest length; the scores it selects are the
same). RETURNN's TF layer `relative_positional_encoding` is a learned (Shaw et al.) encoding,
not this, so the RETURNN lowering is made of `length`, `range_from_length`, `combine` and
`gather` layers.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, register
from netc.ops.frames import TAKE_HELPER, take_helper


def _dynamic(dt, name, what: str) -> None:
    if not isinstance(name, str) or name not in dt.dims or dt[name].kind != "dynamic":
        raise DimError(f"{what} must be a dynamic dim")


@register
class RelPositions(OpDef):
    """`rel_positions(axis=time, out_axis=rel_time, dtype="int32")`: [batch, rel_time], the
    relative positions -(n-1) .. n-1 of a sequence of n frames; rel_time gets lengths 2n-1."""

    name = fn_name = "rel_positions"
    tensors = ()

    def api(self, axis, out_axis, dtype="int32"):
        pass

    def makes_dims(self, attrs):
        return [attrs["out_axis"]]

    def infer(self, dt, args, attrs):
        _dynamic(dt, attrs["axis"], "`rel_positions` needs `axis`, which")
        if attrs["dtype"] not in ("int32", "float32"):
            raise DimError(f"`rel_positions` dtype must be 'int32' or 'float32', got {attrs['dtype']!r}")
        dt.check_lengths([attrs["axis"]], self.fn_name)
        out = attrs["out_axis"]
        if not isinstance(out, str) or out not in dt.dims:
            raise DimError("`rel_positions` needs `out_axis` to be a dim (declared as Dim(name))")
        dt.make_lengths(out, self.fn_name)
        return [OutType(("batch", out), attrs["dtype"])]

    def made_lengths(self, attrs, lens):
        axis = attrs["axis"]
        return {attrs["out_axis"]: [max(2 * n - 1, 0) for n in lens[axis]]} if axis in lens else {}

    def torch_made_dims(self, ctx, op):
        a = op.attrs
        n = ctx.seq_lens(a["axis"])
        return {a["out_axis"]: (f"torch.clamp_min(2 * {n} - 1, 0)", f"max(2 * {ctx.size(a['axis'])} - 1, 0)")}

    def torch(self, ctx, op):
        a = op.attrs
        n = ctx.seq_lens(a["axis"])
        code = f"torch.arange({ctx.size(a['out_axis'])}, device={ctx.device})[None, :] - ({n}[:, None] - 1)"
        return f"({code}).to({ctx.float_dtype})" if a["dtype"] == "float32" else code

    def returnn(self, ctx, op):
        a = op.attrs
        axis, out, dtype = ctx.dim(a["axis"]), ctx.dim(a["out_axis"]), a["dtype"]
        dep = ctx.dim_source(a["axis"])
        length = {"class": "length", "from": [f"base:{dep}"] if dep else [], "axis": axis}
        sub = {
            "length": length,
            "rel_length": {"class": "eval", "from": "length", "eval": "tf.maximum(2 * source(0) - 1, 0)"},
            "positions": {"class": "range_from_length", "from": "rel_length", "out_spatial_dim": out, "dtype": dtype},
            "offset": {
                "class": "eval",
                "from": "length",
                "eval": f"tf.cast(source(0) - 1, tf.{dtype})",
                "out_type": {"dtype": dtype},
            },
            "output": {
                "class": "combine",
                "kind": "sub",
                "from": ["positions", "offset"],
                "allow_broadcast_all_sources": True,
            },
        }
        return {"class": "subnetwork", "from": [], "subnetwork": sub}

    def eager(self, ctx, args, attrs, outs):
        import torch

        n = ctx.size(attrs["axis"])
        dtype = torch.long if attrs["dtype"] == "int32" else torch.float32
        r = torch.arange(max(2 * n - 1, 0), dtype=dtype) - (n - 1)
        return r.expand(ctx.size("batch"), r.shape[0])


@register
class RelShift(OpDef):
    """`rel_shift(x, axis=rel_time, query_axis=time, kv_axis=kv_time)`: x [batch, time, rel_time,
    ...] (rel_time from `rel_positions(axis=time)`) to [batch, time, kv_time, ...]: frame j of
    query i is x's frame of relative position j - i, (j - i) + (n - 1) on rel_time."""

    name = fn_name = "rel_shift"

    def api(self, x, axis, query_axis, kv_axis):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        axis, q, kv = attrs["axis"], attrs["query_axis"], attrs["kv_axis"]
        for k, d in (("axis", axis), ("query_axis", q)):
            if not isinstance(d, str) or d not in x.dims or dt[d].kind != "dynamic":
                raise DimError(f"`rel_shift` needs `{k}` to be a dynamic dim of [{', '.join(x.dims)}]")
        if axis == q or "batch" not in x.dims:
            raise DimError(f"`rel_shift` takes [batch, query_axis, axis, ...], got [{', '.join(x.dims)}]")
        _dynamic(dt, kv, "`rel_shift` needs `kv_axis`, which")
        if kv in x.dims:
            raise DimError(f"`rel_shift`: `{kv}` is already a dim of [{', '.join(x.dims)}]")
        dt.check_lengths([kv], self.fn_name)
        if x.dtype != "float32":
            raise DimError(f"`rel_shift` needs a float tensor, got {x.dtype}")
        return [OutType(dt.canonical([kv if d == axis else d for d in x.dims]))]

    def torch_helpers(self, op):
        return {TAKE_HELPER: take_helper}

    def torch(self, ctx, op):
        a = op.attrs
        axis, q, kv = a["axis"], a["query_axis"], a["kv_axis"]
        x_dims = ctx.in_dims(0)
        n = ctx.seq_lens(q)
        dev = ctx.device
        j = f"torch.arange({ctx.size(kv)}, device={dev})[None, None, :]"
        i = f"torch.arange({ctx.size(q)}, device={dev})[None, :, None]"
        last = f"max({ctx.size(axis)} - 1, 0)"
        idx = f"({j} - {i} + ({n}[:, None, None] - 1)).clamp(0, {last})"  # [batch, query, kv]
        renamed = tuple(kv if d == axis else d for d in x_dims)
        idx = align_code(idx, ("batch", q, kv), renamed)
        code = f"{ctx.helper(TAKE_HELPER)}({ctx.arg(0)}, {idx}, {x_dims.index(axis)})"
        return align_code(code, renamed, op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        axis, q, kv = ctx.dim(a["axis"]), ctx.dim(a["query_axis"]), ctx.dim(a["kv_axis"])
        dep = ctx.dim_source(a["kv_axis"])
        both = {"allow_broadcast_all_sources": True}
        sub = {
            "length": {"class": "length", "from": "data", "axis": q},
            "offset": {"class": "eval", "from": "length", "eval": "source(0) - 1"},  # [batch]
            "q_pos": {"class": "range_in_axis", "from": "data", "axis": q},
            "kv_pos": {"class": "range_in_axis", "from": [f"base:{dep}"] if dep else [], "axis": kv},
            "rel": {"class": "combine", "kind": "sub", "from": ["kv_pos", "q_pos"], **both},  # [query, kv]
            "index": {"class": "combine", "kind": "add", "from": ["rel", "offset"], **both},
            # within the sequence's own 2n-1 frames (padded queries and keys read some frame)
            "clipped": {
                "class": "eval",
                "from": ["index", "offset"],
                "eval": "tf.clip_by_value(source(0), 0, tf.maximum(2 * source(1), 0))",
            },
            "output": {"class": "gather", "from": "data", "axis": axis, "position": "clipped"},
        }
        return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": sub}

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0]
        axis, q, kv = attrs["axis"], attrs["query_axis"], attrs["kv_axis"]
        n = ctx.size(q)
        j = torch.arange(ctx.size(kv))[None, None, :]
        i = torch.arange(n)[None, :, None]
        idx = (j - i + (n - 1)).clamp(0, max(x.data.shape[x.dims.index(axis)] - 1, 0))
        renamed = tuple(kv if d == axis else d for d in x.dims)
        idx = align_tensor(idx, ("batch", q, kv), renamed)
        y = torch.take_along_dim(x.data, idx, dim=x.dims.index(axis))
        return align_tensor(y, renamed, outs[0].dims)
