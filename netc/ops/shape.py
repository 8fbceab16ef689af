"""Reshaping static dims: `split_dims` and `merge_dims` (RETURNN layers of the same names).

Both use row-major order, as RETURNN and torch do: splitting `d` into `(a, b)` puts element
`i * |b| + j` of `d` at `(a=i, b=j)`; merging `(a, b)` into `d` is the inverse. So maxout over
pairs of neighbours (RETURNN `reduce_out` with `num_pieces=2`: max of elements 2j and 2j+1)
is `reduce_max(split_dims(x, axis=d, dims=(half, pieces)), axis=pieces)`.
"""

from __future__ import annotations

from netc.ir.dims import DimError, DimTable
from netc.ir.model import Value
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, register


def _static_dims(dt: DimTable, dims, what: str) -> list[str]:
    names = list(dims) if isinstance(dims, (list, tuple)) else None
    if not names or not all(isinstance(d, str) and d in dt.dims for d in names):
        raise DimError(f"`{what}` needs a tuple of dims")
    if len(set(names)) != len(names):
        raise DimError(f"`{what}`: a dim appears twice in ({', '.join(names)})")
    for d in names:
        if dt[d].kind != "static":
            raise DimError(f"`{what}` works on static dims; `{d}` is {dt[d].kind}")
    return names


def _one_static(dt: DimTable, x: Value, axis, what: str) -> str:
    if not isinstance(axis, str) or axis not in dt.dims:
        raise DimError(f"`{what}` needs `axis` to be one dim")
    if axis not in x.dims:
        raise DimError(f"`axis` `{axis}` is not a dim of [{', '.join(x.dims)}]")
    if dt[axis].kind != "static":
        raise DimError(f"`{what}` works on static dims; `{axis}` is {dt[axis].kind}")
    return axis


@register
class SplitDims(OpDef):
    """`split_dims(x, axis=d, dims=(a, b, ...))`: static dim `d` becomes the dims a, b, ...
    (row-major: the last one varies fastest); their sizes multiply to d's."""

    name = fn_name = "split_dims"

    def api(self, x, axis, dims):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        axis = _one_static(dt, x, attrs["axis"], "split_dims")
        parts = _static_dims(dt, attrs["dims"], "split_dims")
        rest = [d for d in x.dims if d != axis]
        for p in parts:
            if p in rest:
                raise DimError(f"`split_dims` part `{p}` is already a dim of [{', '.join(x.dims)}]")
        if dt.product(parts) != dt[axis].size:
            sizes = " * ".join(str(dt[p].size) for p in parts)
            raise DimError(f"`split_dims`: {sizes} is not the size of `{axis}` ({dt[axis].size})")
        return [OutType(dt.canonical(rest + parts), x.dtype, sparse_dim=x.sparse_dim)]

    def returnn(self, ctx, op):
        axis = op.attrs["axis"]
        return {
            "class": "split_dims",
            "from": ctx.src(0),
            "axis": ctx.dim(axis),
            "dims": [ctx.dim(d) for d in op.attrs["dims"]],
        }

    @staticmethod
    def _split(x_dims: tuple[str, ...], axis: str, parts: list[str]) -> tuple[tuple[str, ...], int]:
        """Dims of x with `axis` unflattened in place, and its position."""
        p = x_dims.index(axis)
        return (*x_dims[:p], *parts, *x_dims[p + 1 :]), p

    def torch(self, ctx, op):
        parts = op.attrs["dims"]
        src, p = self._split(ctx.in_dims(0), op.attrs["axis"], parts)
        sizes = ", ".join(ctx.size(d) for d in parts)
        return align_code(f"{ctx.arg(0)}.unflatten({p}, ({sizes},))", src, op.outs[0].dims)

    def eager(self, ctx, args, attrs, outs):
        parts = attrs["dims"]
        src, p = self._split(args[0].dims, attrs["axis"], parts)
        y = args[0].data.unflatten(p, tuple(ctx.size(d) for d in parts))
        return align_tensor(y, src, outs[0].dims)


@register
class MergeDims(OpDef):
    """`merge_dims(x, dims=(a, b, ...), out_dim=d)`: the static dims a, b, ... of x become one dim
    `d` (row-major, in the order given: the last one varies fastest); d's size is their product."""

    name = fn_name = "merge_dims"

    def api(self, x, dims, out_dim):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        parts = _static_dims(dt, attrs["dims"], "merge_dims")
        if len(parts) < 2:
            raise DimError("`merge_dims` merges at least two dims")
        for p in parts:
            if p not in x.dims:
                raise DimError(f"`merge_dims`: `{p}` is not a dim of [{', '.join(x.dims)}]")
        out = attrs["out_dim"]
        if not isinstance(out, str) or out not in dt.dims or dt[out].kind != "static":
            raise DimError("`merge_dims` needs `out_dim` to be a static dim")
        rest = [d for d in x.dims if d not in parts]
        if out in rest:
            raise DimError(f"`merge_dims`: `{out}` is already a dim of [{', '.join(x.dims)}]")
        if dt.product(parts) != dt[out].size:
            sizes = " * ".join(str(dt[p].size) for p in parts)
            raise DimError(f"`merge_dims`: {sizes} is not the size of `{out}` ({dt[out].size})")
        return [OutType(dt.canonical([*rest, out]), x.dtype, sparse_dim=x.sparse_dim)]

    def returnn(self, ctx, op):
        # keep_order: merge in the order given, not in the tensor's axis order (RETURNN's default
        # before behavior version 6)
        return {
            "class": "merge_dims",
            "from": ctx.src(0),
            "axes": [ctx.dim(d) for d in op.attrs["dims"]],
            "out_dim": ctx.dim(op.attrs["out_dim"]),
            "keep_order": True,
        }

    def torch(self, ctx, op):
        parts = tuple(op.attrs["dims"])
        x_dims = ctx.in_dims(0)
        rest = tuple(d for d in x_dims if d not in parts)
        x = align_code(ctx.arg(0), x_dims, rest + parts)  # the merged dims last, in the given order
        return align_code(f"{x}.flatten({len(rest)})", (*rest, op.attrs["out_dim"]), op.outs[0].dims)

    def eager(self, ctx, args, attrs, outs):
        parts = tuple(attrs["dims"])
        rest = tuple(d for d in args[0].dims if d not in parts)
        x = align_tensor(args[0].data, args[0].dims, rest + parts).flatten(len(rest))
        return align_tensor(x, (*rest, attrs["out_dim"]), outs[0].dims)
