"""Time pooling: `max_pool(x, axis=time, size=k, out_axis=new_time)`.

Windows are frames [j*k, (j+1)*k) of each sequence, j = 0 .. ceil(n/k)-1 (padding "same" on the
right only), so a sequence of n frames gives ceil(n/k) frames on `out_axis`, whose lengths the
op defines. Padded frames never win: the last window of a sequence whose length is not a
multiple of k holds only its own frames.

RETURNN's `pool` layer alone does not do that: with "same" padding it lets the batch's padded
frames into the last window of a shorter sequence (e.g. a 5-frame sequence in a batch of 7
frames pools frame 4 with the padded frame 5), and for k >= 3 TensorFlow's "same" padding
also starts the windows one frame early whenever the batch's longest length is one more than
a multiple of k. netc's RETURNN layer is therefore a `subnetwork`: an `eval` first replaces
each sequence's padded frames by a copy of its last valid frame (without gradient: the max
of a window is then its valid frames' max), then `pool` with "same" padding (k <= 2, where TF
pads on the right only) or, for k >= 3, a `pad` of k-1 frames of -inf on the right and `pool`
with "valid" padding (windows start at frame 0, ceil(n/k) of them).
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.naming import Code
from netc.ops.align import where_valid
from netc.ops.base import OpDef, OutType, register

FILL_HELPER = "fill_padding_with_last_frame"
FILL_HELPER_SOURCE = f'''def {FILL_HELPER}(source, axis_dim, **_kwargs):
    """Each sequence's padded frames along `axis_dim` replaced by its last valid frame (no
    gradient through the copies), so that no padded frame wins a max over frames (max_pool)."""
    import tensorflow as tf

    x = source(0, as_data=True)
    xb = x.copy_as_batch_major()
    axis = xb.get_axis_from_description(axis_dim)
    last = tf.gather(xb.placeholder, tf.maximum(xb.get_dynamic_size(axis) - 1, 0), axis=axis, batch_dims=1)
    filled = xb.copy()
    filled.placeholder = tf.where(
        xb.get_sequence_mask_broadcast(axis=axis), xb.placeholder, tf.stop_gradient(tf.expand_dims(last, axis))
    )
    return filled.copy_compatible_to(x).placeholder
'''


@register
class MaxPool(OpDef):
    """`max_pool(x, axis=time, size=k, out_axis=new_time)` on x [batch, time, feature]: the max
    over windows of k frames; `new_time` (a dynamic dim declared by the model, not used before)
    gets lengths ceil(n/k)."""

    name = fn_name = "max_pool"

    def api(self, x, axis, size, out_axis):
        pass

    def makes_dims(self, attrs: dict) -> list[str]:
        return [attrs["out_axis"]]

    def frames_per_out(self, attrs: dict) -> tuple[str, int] | None:
        return attrs["axis"], attrs["size"]  # windows of their own: the last one partial

    def returnn_helpers(self, op):
        return {FILL_HELPER: FILL_HELPER_SOURCE}

    def infer(self, dt, args, attrs):
        x = args[0]
        axis, k, out = attrs["axis"], attrs["size"], attrs["out_axis"]
        if x.dtype != "float32":
            raise DimError(f"`max_pool` needs a float tensor, got {x.dtype}")
        if not isinstance(axis, str) or axis not in x.dims or dt[axis].kind != "dynamic":
            raise DimError(f"`max_pool` needs `axis` to be a dynamic dim of [{', '.join(x.dims)}]")
        rest = [d for d in x.dims if d not in ("batch", axis)]
        if "batch" not in x.dims or len(rest) != 1 or dt[rest[0]].kind != "static":
            raise DimError(f"`max_pool` pools [batch, {axis}, feature], got [{', '.join(x.dims)}]")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise DimError(f"`max_pool` needs a window `size` >= 1, got {k!r}")
        if not isinstance(out, str) or out not in dt.dims:
            raise DimError("`max_pool` needs `out_axis` to be a dim (declared as Dim(name))")
        dt.make_lengths(out, "max_pool", may_be_empty=dt[axis].may_be_empty)  # ceil(n / k) is 0 for n = 0
        return [OutType(dt.canonical(["batch", out, rest[0]]))]

    def returnn(self, ctx, op):
        axis, k, out = op.attrs["axis"], op.attrs["size"], op.attrs["out_axis"]
        fill = {"class": "eval", "from": "data", "eval": Code(FILL_HELPER), "eval_locals": {"axis_dim": ctx.dim(axis)}}
        pool = {"class": "pool", "mode": "max", "pool_size": (k,), "out_spatial_dims": [ctx.derived_dim(out)]}
        if k <= 2:  # TF's "same" padding pads on the right only
            sub = {"filled": fill, "output": {**pool, "from": "filled", "padding": "same"}}
        else:
            pad = {"class": "pad", "from": "filled", "axes": ctx.dim(axis), "padding": (0, k - 1)}
            pad["value"] = Code("float('-inf')")
            sub = {"filled": fill, "padded": pad, "output": {**pool, "from": "padded", "padding": "valid"}}
        return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": sub}

    def made_lengths(self, attrs, lens):
        k, axis = attrs["size"], attrs["axis"]
        return {attrs["out_axis"]: [-(-n // k) for n in lens[axis]]} if axis in lens else {}

    def torch_made_dims(self, ctx, op) -> dict[str, tuple[str, str]]:
        k = op.attrs["size"]
        axis = op.attrs["axis"]
        return {op.attrs["out_axis"]: (f"({ctx.seq_lens(axis)} + {k - 1}) // {k}", f"-(-{ctx.size(axis)} // {k})")}

    # canonical order: x is [batch, time, feature], the result [batch, new_time, feature]
    def torch(self, ctx, op):
        k, out = op.attrs["size"], op.attrs["out_axis"]
        x = where_valid(ctx.arg(0), ctx.mask(op.attrs["axis"], ctx.in_dims(0)), "float('-inf')")
        # the last window filled up with -inf, then windows as a dim of their own: torch.export
        # fixes the length a pooling op (`max_pool1d`'s `ceil_mode`) runs over
        fill = f"{ctx.size(out)} * {k} - {ctx.size(op.attrs['axis'])}"
        padded = f"torch.nn.functional.pad({x}, (0, 0, 0, {fill}), value=float('-inf'))"
        pooled = f"{padded}.unflatten(1, ({ctx.size(out)}, {k})).amax(dim=2)"
        return where_valid(pooled, ctx.mask(out, op.outs[0].dims), "0.0")  # no -inf in padded frames

    def eager(self, ctx, args, attrs, outs):
        import torch

        x, k = args[0].data, attrs["size"]
        frames = [x[:, j : j + k].amax(dim=1) for j in range(0, x.shape[1], k)]  # the last may be shorter
        return torch.stack(frames, dim=1) if frames else x.new_zeros(x.shape[0], 0, x.shape[2])
