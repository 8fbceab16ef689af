"""`fit_frames(x, axis=up, out_axis=time)`: x's frames along a dynamic dim read as the frames of
another dynamic dim whose lengths are already known (an input's): each sequence's first n frames,
n its length of `out_axis`. RETURNN's `reinterpret_data` with `size_base` (a hybrid model's
upsampled encoder read over the alignment's frames)."""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.align import align_code, align_tensor
from netc.ops.base import EagerUnsupported, OpDef, OutType, register

FIT_HELPER = "fit_frames"


def _fit_helper(name: str) -> str:
    return f'''def {name}(x, dim: int, n: int):
    """x with `n` frames along `dim`: its first n, zeros after its own (beyond every valid frame)."""
    if x.shape[dim] >= n:
        return x.narrow(dim, 0, n)
    shape = list(x.shape)
    shape[dim] = n - x.shape[dim]
    return torch.cat([x, x.new_zeros(shape)], dim)
'''


def _renamed(dims: tuple[str, ...], old: str, new: str) -> tuple[str, ...]:
    return tuple(new if d == old else d for d in dims)


@register
class FitFrames(OpDef):
    """Each sequence's first n frames of `axis` as the frames of `out_axis` (n: its length of
    `out_axis`, which must not exceed its length of `axis`)."""

    name = fn_name = "fit_frames"

    def api(self, x, axis, out_axis):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        axis, out = attrs["axis"], attrs["out_axis"]
        if not isinstance(axis, str) or axis not in x.dims or dt[axis].kind != "dynamic":
            raise DimError(f"`fit_frames` needs `axis` to be a dynamic dim of [{', '.join(x.dims)}]")
        if not isinstance(out, str) or out not in dt.dims or dt[out].kind != "dynamic" or out in x.dims:
            raise DimError("`fit_frames` needs `out_axis` to be a dynamic dim the tensor does not have")
        dt.check_lengths([out], "fit_frames")  # its lengths come from elsewhere: known here
        return [OutType(dt.canonical(_renamed(x.dims, axis, out)), x.dtype, sparse_dim=x.sparse_dim)]

    def torch_helpers(self, op):
        return {FIT_HELPER: _fit_helper}

    def torch(self, ctx, op):
        a = op.attrs
        dims = ctx.in_dims(0)
        code = f"{ctx.helper(FIT_HELPER)}({ctx.arg(0)}, {dims.index(a['axis'])}, {ctx.size(a['out_axis'])})"
        return align_code(code, _renamed(dims, a["axis"], a["out_axis"]), op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        out = ctx.dim(a["out_axis"])
        # the frames 0..n-1 of `out_axis` gathered along `axis` (within it: no sequence has more frames
        # of `out_axis` than of `axis`): the tensor's size along `out_axis` is its longest length
        deps = [f"base:{d}"] if (d := ctx.dim_source(a["out_axis"])) else []
        sub: dict = {
            "frames": {"class": "constant", "value": 0, "dtype": "int32", "shape": [out]},
            "positions": {"class": "range_in_axis", "from": "frames", "axis": out},
            "output": {
                "class": "gather",
                "from": "data",
                "axis": ctx.dim(a["axis"]),
                "position": "positions",
            },
        }
        if deps:
            sub["frames"]["shape_deps"] = deps
        return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": sub}

    def eager(self, ctx, args, attrs, outs):
        x = args[0]
        ax = x.dims.index(attrs["axis"])
        n, own = ctx.size(attrs["out_axis"]), x.data.shape[ax]
        if n > own:
            raise EagerUnsupported(
                f"`fit_frames`: a sequence has {n} frames of `{attrs['out_axis']}` but only {own} of `{attrs['axis']}`"
            )
        y = x.data.narrow(ax, 0, n)
        return align_tensor(y, _renamed(x.dims, attrs["axis"], attrs["out_axis"]), outs[0].dims)
