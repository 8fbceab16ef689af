"""Frames of a dynamic axis, per sequence: `slice_frames`, `pad_frames`, `shift_right`.

Each sequence is sliced, padded or shifted within its own length, as eager mode does it
running one sequence alone: `slice_frames(y, axis=time, stop=-1, out_axis=t1)` drops each
sequence's own last frame (Python's `y[:-1]` of that sequence), `pad_frames` puts the value
after each sequence's own last frame, not after the batch's longest one. `slice_frames` and
`pad_frames` make a new dynamic dim (declared by the model, as `max_pool`'s `out_axis`);
`shift_right` keeps the dim and its lengths (a decoder's input labels: BOS, then the labels
without the last).

RETURNN: `slice_nd` with per-sequence start and size layers computed from the `length` of
the axis (its `out_spatial_dim` is the new dim), `pad` with `handle_dynamic_dims` (right
padding after each sequence's end) and `out_dims`, and for `shift_right` an `eval` that pads
and cuts the axis back to its size (the template, dims and lengths stay the input's).
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.naming import Code
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, register


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _frames_axis(dt, op: str, x, axis) -> None:
    if not isinstance(axis, str) or axis not in x.dims or dt[axis].kind != "dynamic":
        raise DimError(f"`{op}` needs `axis` to be a dynamic dim of [{', '.join(x.dims)}]")
    if "batch" not in x.dims:
        raise DimError(f"`{op}` needs a tensor with the batch dim, got [{', '.join(x.dims)}]")


def _out_axis(dt, op: str, out, may_be_empty: bool = False) -> None:
    if not isinstance(out, str) or out not in dt.dims:
        raise DimError(f"`{op}` needs `out_axis` to be a dim (declared as Dim(name))")
    dt.make_lengths(out, op, may_be_empty)


def _check_value(dt, op: str, x, value) -> None:
    """`value` fills new frames: a number for a float tensor, a class for labels, an int for ints."""
    if x.dtype == "float32":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise DimError(f"`{op}` of a float tensor fills with a number, got {value!r}")
    elif x.dtype == "int32":
        if not _int(value):
            raise DimError(f"`{op}` of an int tensor fills with an integer, got {value!r}")
        if x.sparse_dim and not 0 <= value < dt[x.sparse_dim].size:
            raise DimError(f"label {value} is not a class of `{x.sparse_dim}` (0..{dt[x.sparse_dim].size - 1})")
    else:
        raise DimError(f"`{op}` needs a float or int tensor, got {x.dtype}")


def _renamed(dims: tuple[str, ...], old: str, new: str) -> tuple[str, ...]:
    return tuple(new if d == old else d for d in dims)


def _fill(x_dtype: str, value):
    return float(value) if x_dtype == "float32" else int(value)


# --- slice_frames ----------------------------------------------------------------------


def slice_len(n: int, start: int | None, stop: int | None) -> int:
    """The length of a sequence of n frames sliced `[start:stop]` (Python's rule)."""
    return len(range(n)[start:stop])


def _slice_size_code(n: str, start: int | None, stop: int | None) -> str:
    """`slice_len` of the int expression `n` as integer arithmetic (TorchScript has no slices of
    a `range`); `start`/`stop` are the op's constants."""

    def bound(k: int | None, default: str) -> str:
        if k is None:
            return default
        return f"min({k}, {n})" if k >= 0 else f"max({n} - {-k}, 0)"

    return f"max({bound(stop, n)} - {bound(start, '0')}, 0)"


@register
class SliceFrames(OpDef):
    """`slice_frames(x, axis=time, start=None, stop=None, out_axis=new_time)`: each sequence's
    frames [start:stop] as Python slices it (negative bounds count from the sequence's own end)."""

    name = fn_name = "slice_frames"

    def api(self, x, axis, out_axis, start=None, stop=None):
        pass

    def makes_dims(self, attrs):
        return [attrs["out_axis"]]

    def infer(self, dt, args, attrs):
        x = args[0]
        _frames_axis(dt, "slice_frames", x, attrs["axis"])
        for k in ("start", "stop"):
            if attrs[k] is not None and not _int(attrs[k]):
                raise DimError(f"`slice_frames` takes integer bounds (or None), got {k}={attrs[k]!r}")
        if attrs["start"] is None and attrs["stop"] is None:
            raise DimError("`slice_frames` without `start` and `stop` would copy the frames; use the tensor itself")
        # a sequence keeps a frame when the slice starts at its first and ends after it
        keeps = attrs["start"] in (None, 0) and (attrs["stop"] is None or attrs["stop"] > 0)
        _out_axis(dt, "slice_frames", attrs["out_axis"], may_be_empty=not keeps or dt[attrs["axis"]].may_be_empty)
        dims = _renamed(x.dims, attrs["axis"], attrs["out_axis"])
        return [OutType(dt.canonical(dims), x.dtype, sparse_dim=x.sparse_dim)]

    def made_lengths(self, attrs, lens):
        axis = attrs["axis"]
        if axis not in lens:
            return {}
        return {attrs["out_axis"]: [slice_len(n, attrs["start"], attrs["stop"]) for n in lens[axis]]}

    @staticmethod
    def _start_stop(n: str, start: int | None, stop: int | None, maximum: str, minimum: str) -> tuple[str, str]:
        """Code for each sequence's first frame and end, given code `n` of its length."""
        s = "0" if start is None else (str(start) if start >= 0 else f"{maximum}({n} + ({start}), 0)")
        e = n if stop is None else (f"{minimum}({n}, {stop})" if stop >= 0 else f"{maximum}({n} + ({stop}), 0)")
        return s, e

    def torch_made_dims(self, ctx, op):
        a = op.attrs
        n = ctx.seq_lens(a["axis"])
        s, e = self._start_stop(n, a["start"], a["stop"], "torch.clamp_min", "torch.clamp_max")
        lens = f"torch.clamp_min({e} - {s}, 0)"
        # the longest sequence's slice is the longest (a slice's length grows with the sequence's)
        size = _slice_size_code(ctx.size(a["axis"]), a["start"], a["stop"])
        return {a["out_axis"]: (lens, size)}

    def torch_helpers(self, op):
        start = op.attrs["start"]
        return {TAKE_HELPER: take_helper} if start is not None and start < 0 else {}

    def torch(self, ctx, op):
        a = op.attrs
        axis, out = a["axis"], a["out_axis"]
        x_dims = ctx.in_dims(0)
        ax = x_dims.index(axis)
        size = ctx.size(out)
        if a["start"] is None or a["start"] >= 0:  # the same first frame for every sequence
            code = f"{ctx.arg(0)}.narrow({ax}, {a['start'] or 0}, {size})"
        else:  # each sequence's own first frame: gather its frames
            n = ctx.seq_lens(axis)
            start = f"torch.clamp_min({n} + ({a['start']}), 0)"
            last = f"max({ctx.size(axis)} - 1, 0)"
            idx = f"torch.clamp_max({start}[:, None] + torch.arange({size}, device={ctx.device}), {last})"
            idx = align_code(idx, ("batch", axis), x_dims)
            code = f"{ctx.helper(TAKE_HELPER)}({ctx.arg(0)}, {idx}, {ax})"
        return align_code(code, _renamed(x_dims, axis, out), op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        axis = ctx.dim(a["axis"])
        s, e = self._start_stop("source(0)", a["start"], a["stop"], "tf.maximum", "tf.minimum")
        out = ctx.dim(a["out_axis"])
        # batch-major first: with a time-major input `slice_nd` puts the new lengths on another dim
        order = [ctx.dim(d) for d in ["batch", *(d for d in ctx.in_dims(0) if d != "batch")]]
        sub: dict = {"data_bm": {"class": "transpose", "from": "data", "perm": order}}
        sub["length"] = {"class": "length", "from": "data_bm", "axis": axis}
        sub["new_length"] = {"class": "eval", "from": "length", "eval": f"tf.maximum({e} - {s}, 0)"}
        # `slice_nd` gives its dim these lengths without marking the tensor as the dim's size, which a
        # loop over the dim then asserts on: `range_from_length` marks it, `length` reads it back
        sub["positions"] = {"class": "range_from_length", "from": "new_length", "out_spatial_dim": out}
        sub["size"] = {"class": "length", "from": "positions", "axis": out}
        nd = {"class": "slice_nd", "from": "data_bm", "axis": axis, "size": "size", "out_spatial_dim": out}
        if a["start"] is not None and a["start"] < 0:
            sub["start"] = {"class": "eval", "from": "length", "eval": s}
            nd["start"] = "start"
        else:
            nd["start"] = a["start"] or 0
        sub["output"] = nd
        return {"class": "subnetwork", "from": ctx.src(0), "subnetwork": sub}

    def eager(self, ctx, args, attrs, outs):
        x = args[0]
        axis, out = attrs["axis"], attrs["out_axis"]
        ax = x.dims.index(axis)
        y = x.data[(slice(None),) * ax + (slice(attrs["start"], attrs["stop"]),)]
        return align_tensor(y, _renamed(x.dims, axis, out), outs[0].dims)


# --- frames picked per sequence ---------------------------------------------------------

TAKE_HELPER = "take_frames"


def take_helper(name: str) -> str:
    """`torch.take_along_dim` without its broadcasting of the index, which torch.export turns
    into a fixed batch size and length (the index is expanded to x's sizes instead)."""
    return f'''def {name}(x, idx, dim: int):
    """x's frames at `idx` along `dim` (idx has x's dims, of size 1 where it does not vary)."""
    if torch.jit.is_scripting():  # TorchScript and ONNX (which has a form of take_along_dim)
        return torch.take_along_dim(x, idx, dim)
    shape = list(x.shape)
    shape[dim] = idx.shape[dim]
    return x.gather(dim, idx.expand(shape))
'''


# --- pad_frames ------------------------------------------------------------------------


def _padded_code(ctx, x: str, x_dims: tuple[str, ...], axis: str, left: int, right: int, value, size: str) -> str:
    """Code for x's frames along `axis` moved `left` frames on, `value` before them and in the
    frames after each sequence's own last one, `size` frames in all (the pad spec written out
    here, not built from shapes at run time, which the ONNX exporter cannot follow)."""
    ax = x_dims.index(axis)
    pad = (0, 0) * (len(x_dims) - ax - 1) + (left, right)
    pos = f"torch.arange({size}, device={ctx.device})[None, :]"
    inside = f"({pos} < {ctx.seq_lens(axis)}[:, None] + {left})"
    if left:
        inside = f"({pos} >= {left}) & {inside}"
    valid = align_code(f"({inside})", ("batch", axis), x_dims)
    padded = f"torch.nn.functional.pad({x}, {pad}, value={float(value)!r})"
    if size != f"{ctx.size(axis)} + {left + right}":
        padded = f"{padded}.narrow({ax}, 0, {size})"
    return f"torch.where({valid}, {padded}, {value!r})"


@register
class PadFrames(OpDef):
    """`pad_frames(x, axis=time, left=0, right=0, value=0.0, out_axis=new_time)`: `left` frames
    of `value` before each sequence and `right` after its own last frame; lengths n + left + right."""

    name = fn_name = "pad_frames"

    def api(self, x, axis, out_axis, left=0, right=0, value=0.0):
        pass

    def makes_dims(self, attrs):
        return [attrs["out_axis"]]

    def infer(self, dt, args, attrs):
        x = args[0]
        _frames_axis(dt, "pad_frames", x, attrs["axis"])
        left, right = attrs["left"], attrs["right"]
        if not (_int(left) and _int(right)) or left < 0 or right < 0 or left + right == 0:
            raise DimError(f"`pad_frames` pads by integers left, right >= 0, not both 0; got {left!r}, {right!r}")
        _check_value(dt, "pad_frames", x, attrs["value"])
        _out_axis(dt, "pad_frames", attrs["out_axis"])
        dims = _renamed(x.dims, attrs["axis"], attrs["out_axis"])
        return [OutType(dt.canonical(dims), x.dtype, sparse_dim=x.sparse_dim)]

    def made_lengths(self, attrs, lens):
        axis = attrs["axis"]
        extra = attrs["left"] + attrs["right"]
        return {attrs["out_axis"]: [n + extra for n in lens[axis]]} if axis in lens else {}

    def torch_made_dims(self, ctx, op):
        a = op.attrs
        extra = a["left"] + a["right"]
        return {a["out_axis"]: (f"{ctx.seq_lens(a['axis'])} + {extra}", f"{ctx.size(a['axis'])} + {extra}")}

    def torch(self, ctx, op):
        a = op.attrs
        x_dims = ctx.in_dims(0)
        value = _fill(op.outs[0].dtype, a["value"])
        size = f"{ctx.size(a['axis'])} + {a['left'] + a['right']}"
        code = _padded_code(ctx, ctx.arg(0), x_dims, a["axis"], a["left"], a["right"], value, size)
        return align_code(code, _renamed(x_dims, a["axis"], a["out_axis"]), op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        return {
            "class": "pad",
            "from": ctx.src(0),
            "axes": ctx.dim(a["axis"]),
            "padding": (a["left"], a["right"]),
            "value": _fill(op.outs[0].dtype, a["value"]),
            "handle_dynamic_dims": True,  # right padding after each sequence's own end
            "out_dims": [ctx.derived_dim(a["out_axis"])],
        }

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0]
        axis = attrs["axis"]
        ax = x.dims.index(axis)
        value = _fill(outs[0].dtype, attrs["value"])
        shape = list(x.data.shape)
        parts = [x.data.new_full(shape[:ax] + [attrs["left"]] + shape[ax + 1 :], value), x.data]
        parts.append(x.data.new_full(shape[:ax] + [attrs["right"]] + shape[ax + 1 :], value))
        return align_tensor(torch.cat(parts, ax), _renamed(x.dims, axis, attrs["out_axis"]), outs[0].dims)


# --- shift_right -----------------------------------------------------------------------

SHIFT_HELPER = "shift_frames_right"
SHIFT_SOURCE = f'''def {SHIFT_HELPER}(source, axis_dim, amount, value, **_kwargs):
    """The frames along `axis_dim` moved `amount` on, `value` in the first `amount` frames; the
    axis keeps its size and lengths (each sequence's last `amount` frames drop off)."""
    import tensorflow as tf

    x = source(0, as_data=True)
    axis = x.get_axis_from_description(axis_dim)
    paddings = [(0, 0)] * x.batch_ndim
    paddings[axis] = (amount, 0)
    y = tf.pad(x.placeholder, paddings, constant_values=tf.cast(value, x.placeholder.dtype))
    return tf.gather(y, tf.range(tf.shape(x.placeholder)[axis]), axis=axis)
'''


@register
class ShiftRight(OpDef):
    """`shift_right(x, axis=time, value=0.0, amount=1)`: frame t is x's frame t - amount, the first
    `amount` frames are `value`; same dims and lengths (a decoder's input: BOS, then the labels
    without their last)."""

    name = fn_name = "shift_right"

    def api(self, x, axis, value=0.0, amount=1):
        pass

    def infer(self, dt, args, attrs):
        x = args[0]
        _frames_axis(dt, "shift_right", x, attrs["axis"])
        if not _int(attrs["amount"]) or attrs["amount"] < 1:
            raise DimError(f"`shift_right` moves frames by an integer `amount` >= 1, got {attrs['amount']!r}")
        _check_value(dt, "shift_right", x, attrs["value"])
        return [OutType(x.dims, x.dtype, sparse_dim=x.sparse_dim)]

    def returnn_helpers(self, op):
        return {SHIFT_HELPER: SHIFT_SOURCE}

    def returnn(self, ctx, op):
        a = op.attrs
        loc = {"axis_dim": ctx.dim(a["axis"]), "amount": a["amount"], "value": _fill(op.outs[0].dtype, a["value"])}
        return {"class": "eval", "from": ctx.src(0), "eval": Code(SHIFT_HELPER), "eval_locals": loc}

    def torch(self, ctx, op):
        a = op.attrs
        value = _fill(op.outs[0].dtype, a["value"])
        return _padded_code(ctx, ctx.arg(0), ctx.in_dims(0), a["axis"], a["amount"], 0, value, ctx.size(a["axis"]))

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0]
        ax = x.dims.index(attrs["axis"])
        shape = list(x.data.shape)
        value = _fill(outs[0].dtype, attrs["value"])
        y = torch.cat([x.data.new_full(shape[:ax] + [attrs["amount"]] + shape[ax + 1 :], value), x.data], ax)
        return y.narrow(ax, 0, shape[ax])


# --- replace_dim -----------------------------------------------------------------------


@register
class ReplaceDim(OpDef):
    """`replace_dim(x, axis=time, out_axis=kv_time)`: the same tensor with dynamic dim `axis` named
    `out_axis`, which gets `axis`'s lengths: a second view of a sequence, for attention of the
    sequence over itself ([batch, time, kv_time] weights, padded keys masked per sequence)."""

    name = fn_name = "replace_dim"

    def api(self, x, axis, out_axis):
        pass

    def makes_dims(self, attrs):
        return [attrs["out_axis"]]

    def infer(self, dt, args, attrs):
        x = args[0]
        if not isinstance(attrs["axis"], str) or attrs["axis"] not in x.dims or dt[attrs["axis"]].kind != "dynamic":
            raise DimError(f"`replace_dim` needs `axis` to be a dynamic dim of [{', '.join(x.dims)}]")
        # the same lengths: a sequence without frames along `axis` has none along `out_axis`
        _out_axis(dt, "replace_dim", attrs["out_axis"], may_be_empty=dt[attrs["axis"]].may_be_empty)
        dims = _renamed(x.dims, attrs["axis"], attrs["out_axis"])
        return [OutType(dt.canonical(dims), x.dtype, sparse_dim=x.sparse_dim)]

    def made_lengths(self, attrs, lens):
        return {attrs["out_axis"]: list(lens[attrs["axis"]])} if attrs["axis"] in lens else {}

    def torch_made_dims(self, ctx, op):
        axis = op.attrs["axis"]
        return {op.attrs["out_axis"]: (ctx.seq_lens(axis), ctx.size(axis))}

    def torch(self, ctx, op):
        a = op.attrs
        return align_code(ctx.arg(0), _renamed(ctx.in_dims(0), a["axis"], a["out_axis"]), op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        # RETURNN gives the new dim tag the old one's lengths (a copy of its size tensor)
        tags = [(ctx.dim(a["axis"]), ctx.dim(a["out_axis"]))]
        return {"class": "reinterpret_data", "from": ctx.src(0), "set_dim_tags": tags}

    def eager(self, ctx, args, attrs, outs):
        x = args[0]
        return align_tensor(x.data, _renamed(x.dims, attrs["axis"], attrs["out_axis"]), outs[0].dims)
