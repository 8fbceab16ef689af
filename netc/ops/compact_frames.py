"""`compact_frames(x, mask, axis=time, out_axis=kept)`: the frames of x along the dynamic dim `time`
where the bool `mask` [batch, time] holds, in order, as the frames of a new dynamic dim `kept` whose
lengths are each sequence's number of such valid frames. RETURNN's `masked_computation` outside a
rec unit (with a `copy` unit: a transducer's emitted labels without the blanks, a CTC target).
RETURNN: that layer itself; torch and eager: the same scatter of the kept frames."""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, register

HELPER = "compact_frames"


def _helper(name: str) -> str:
    return f'''def {name}(x, keep):
    """x [batch, time, ...] at the frames where keep [batch, time] holds, in order, zeros after
    each sequence's: (frames [batch, n, ...], their int64 [batch] lengths), n the longest."""
    lens = keep.sum(1)
    n = int(lens.max()) if keep.shape[0] else 0
    out = x.new_zeros([x.shape[0], n] + list(x.shape[2:]))  # (a list: TorchScript scripts it)
    rows = torch.arange(x.shape[0], device=x.device)[:, None].expand_as(keep)
    out.index_put_((rows[keep], (keep.long().cumsum(1) - 1)[keep]), x[keep])
    return out, lens
'''


def _rest(dims: tuple[str, ...], axis: str) -> tuple[str, ...]:
    return tuple(d for d in dims if d not in ("batch", axis))


@register
class CompactFrames(OpDef):
    """The frames of `axis` where `mask` holds (and the sequence has them) as `out_axis`'s frames."""

    name = fn_name = "compact_frames"
    tensors = ("x", "mask")

    def api(self, x, mask, axis, out_axis):
        pass

    def makes_dims(self, attrs):
        return [attrs["out_axis"]]

    def infer(self, dt, args, attrs):
        x, mask = args
        axis, out = attrs["axis"], attrs["out_axis"]
        if not isinstance(axis, str) or axis not in x.dims or "batch" not in x.dims or dt[axis].kind != "dynamic":
            raise DimError(f"`compact_frames` needs `axis` to be a dynamic dim of [{', '.join(x.dims)}] (with batch)")
        if mask.dtype != "bool" or set(mask.dims) != {"batch", axis}:
            raise DimError(
                f"`compact_frames` needs a bool `mask` [batch, {axis}], got {mask.dtype} [{', '.join(mask.dims)}]"
            )
        if not isinstance(out, str) or out not in dt.dims or out in x.dims:
            raise DimError("`compact_frames` needs `out_axis` to be a dim the tensor does not have (Dim(name))")
        dt.make_lengths(out, "compact_frames", may_be_empty=True)  # a mask that holds nowhere: no frame
        dims = tuple(out if d == axis else d for d in x.dims)
        return [OutType(dt.canonical(dims), x.dtype, sparse_dim=x.sparse_dim)]

    def returnn(self, ctx, op):
        a = op.attrs
        return {
            "class": "masked_computation",
            "from": ctx.src(0),
            "mask": ctx.src(1),
            "unit": {"class": "copy", "from": "data"},
            "in_spatial_dim": ctx.dim(a["axis"]),
            "out_spatial_dim": ctx.dim(a["out_axis"]),
        }

    def torch_helpers(self, op):
        return {HELPER: _helper}

    def torch_first(self, ctx, op):
        axis = op.attrs["axis"]
        rest = _rest(ctx.in_dims(0), axis)
        x = ctx.aligned(0, ("batch", axis, *rest))
        keep = f"({ctx.aligned(1, ('batch', axis))} & {ctx.mask(axis, ('batch', axis))})"
        return "compacted", f"{ctx.helper(HELPER)}({x}, {keep})"

    def torch_made_dims(self, ctx, op):
        return {op.attrs["out_axis"]: (f"{ctx.first}[1]", f"{ctx.first}[0].shape[1]")}

    def torch(self, ctx, op):
        a = op.attrs
        dims = ("batch", a["out_axis"], *_rest(ctx.in_dims(0), a["axis"]))
        return align_code(f"{ctx.first}[0]", dims, op.outs[0].dims)

    def eager(self, ctx, args, attrs, outs):
        x, mask = args
        axis, out = attrs["axis"], attrs["out_axis"]
        rest = _rest(x.dims, axis)
        data = x.data.permute([x.dims.index(d) for d in ("batch", axis, *rest)])
        keep = mask.data.permute([mask.dims.index(d) for d in ("batch", axis)]).bool()
        y = data[:, keep[0]]  # eager runs one sequence: batch of one, no padding
        return align_tensor(y, ("batch", out, *rest), outs[0].dims)
