"""Caches carried from chunk to chunk in a chunked loop (`for c in chunks(x, chunk):`).

A streaming encoder's chunk attends over itself and the keys and values of the K chunks before
it, and a causal convolution reads its input's last (k - 1) frames before the chunk: both are
states over a static window dim, joined with the chunk's frames and cut back to the window.
Inside the loop the chunk dim is dynamic (each step's lengths), so the join is a static dim:

- `join_chunk(cache, x, cache_axis=win, axis=chunk, out_axis=kv)`: [..., win, ...] and
  [..., chunk, ...] -> [..., kv, ...], kv static of |win| + N frames: the cache's, then the
  chunk's valid frames, then zeros (False for bool) up to N. A validity mask joined the same
  way (`join_chunk(valid, full(batch, chunk, value=True, dtype="bool"), ...)`) marks the chunk's
  padding invalid, so a short last chunk's padded frames never count (mask them in the softmax);
- `slice_static(x, axis=kv, start=s, out_axis=win)`: frames [s, s + |win|) of a static dim (the
  new cache: the last |win| frames of the join);
- `to_chunk(y, axis=frames, like=c)`: a value over N static frames back over the chunk dim of
  `like` (its first frames, as many as the step's chunk has): a convolution of the joined window
  ("valid", over a static dim) gives the chunk's frames.

torch: the chunk dim's padded size is N in the loop, so these are `cat`/`narrow`/a view; eager
mode pads its chunk (k <= N frames) to N; RETURNN: `eval` layers (the chunk's frames are the
first max(lengths) of N in the loop) and a `slice` layer.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.naming import Code
from netc.ops.align import align_code, align_tensor, where_valid
from netc.ops.base import OpDef, OutType, register


def _static(dt, name, what: str, op: str) -> int:
    if not isinstance(name, str) or name not in dt.dims or dt[name].kind != "static":
        raise DimError(f"`{op}` needs `{what}` to be a static dim, got {name!r}")
    return dt[name].size


def _chunk_size(dt, name, op: str) -> int:
    d = dt.dims.get(name) if isinstance(name, str) else None
    if d is None or d.kind != "dynamic" or d.max_frames is None:
        raise DimError(f"`{op}` needs `axis` to be the chunk dim of a chunked loop it is in, got {name!r}")
    return d.max_frames


def _renamed(dims: tuple[str, ...], old: str, new: str) -> tuple[str, ...]:
    return tuple(new if d == old else d for d in dims)


def _fill(dtype: str) -> str:
    return "False" if dtype == "bool" else "0.0"


@register
class JoinChunk(OpDef):
    """`join_chunk(cache, x, cache_axis=win, axis=chunk, out_axis=kv)`: the cache's frames, then the
    chunk's (padded with zeros to N), over the static `kv` of |win| + N frames."""

    name = fn_name = "join_chunk"
    tensors = ("cache", "x")

    def api(self, cache, x, cache_axis, axis, out_axis):
        pass

    def infer(self, dt, args, attrs):
        cache, x = args
        a = attrs
        n = _chunk_size(dt, a["axis"], "join_chunk")
        w = _static(dt, a["cache_axis"], "cache_axis", "join_chunk")
        kv = _static(dt, a["out_axis"], "out_axis", "join_chunk")
        if a["axis"] not in x.dims:
            raise DimError(f"`join_chunk` joins a value over the chunk dim `{a['axis']}`, got [{', '.join(x.dims)}]")
        if a["cache_axis"] not in cache.dims or a["out_axis"] in cache.dims or a["out_axis"] in x.dims:
            raise DimError(
                f"`join_chunk` needs the cache over `{a['cache_axis']}` and neither over `{a['out_axis']}`, "
                f"got [{', '.join(cache.dims)}] and [{', '.join(x.dims)}]"
            )
        if set(_renamed(cache.dims, a["cache_axis"], a["axis"])) != set(x.dims):
            raise DimError(
                f"`join_chunk` needs the cache's dims to be x's with `{a['cache_axis']}` for `{a['axis']}`, "
                f"got [{', '.join(cache.dims)}] and [{', '.join(x.dims)}]"
            )
        if cache.dtype != x.dtype:
            raise DimError(f"`join_chunk` joins values of one dtype, got {cache.dtype} and {x.dtype}")
        if kv != w + n:
            raise DimError(
                f"`join_chunk` needs `{a['out_axis']}` to have |{a['cache_axis']}| + N = {w} + {n} = {w + n} "
                f"frames (N: the chunk's most frames), got {kv}"
            )
        return [OutType(dt.canonical(_renamed(x.dims, a["axis"], a["out_axis"])), x.dtype)]

    def torch(self, ctx, op):
        a = op.attrs
        out = op.outs[0].dims
        cache = ctx.aligned(0, _renamed(out, a["out_axis"], a["cache_axis"]))
        have = _renamed(out, a["out_axis"], a["axis"])
        x = where_valid(ctx.aligned(1, have), ctx.mask(a["axis"], have), _fill(op.outs[0].dtype))
        return f"torch.cat([{cache}, {x}], {out.index(a['out_axis'])})"

    def returnn(self, ctx, op):
        a = op.attrs
        return {
            "class": "eval",
            "from": [ctx.src(0), ctx.src(1)],
            "eval": Code(JOIN_HELPER),
            "out_type": Code(JOIN_TYPE_HELPER),
            "eval_locals": {
                "cache_dim": ctx.dim(a["cache_axis"]),
                "chunk_dim": ctx.dim(a["axis"]),
                "out_dim": ctx.dim(a["out_axis"]),
            },
        }

    def returnn_helpers(self, op):
        return {JOIN_HELPER: JOIN_SOURCE}

    def eager(self, ctx, args, attrs, outs):
        import torch

        a = attrs
        cache, x = args
        out = outs[0].dims
        have = _renamed(out, a["out_axis"], a["axis"])
        c = align_tensor(cache.data, _renamed(cache.dims, a["cache_axis"], a["out_axis"]), out)
        xs = align_tensor(x.data, x.dims, have)
        ax = out.index(a["out_axis"])
        shape = list(xs.shape)
        shape[ax] = ctx.size(a["out_axis"]) - c.shape[ax] - xs.shape[ax]  # eager: this sequence's k <= N frames
        return torch.cat([c, xs, xs.new_zeros(shape)], ax)


JOIN_TYPE_HELPER = "join_chunk_type"
JOIN_HELPER = "join_chunk"
JOIN_SOURCE = f'''def {JOIN_TYPE_HELPER}(sources, name, cache_dim, out_dim, **_kwargs):
    """The template of a joined cache: the cache's, over `out_dim` instead of `cache_dim`."""
    cache = sources[0].output
    out = cache.copy_template_replace_dim_tag(axis=cache.get_axis_from_description(cache_dim), new_dim_tag=out_dim)
    return out.copy_template(name="%s_output" % name)


def _join_chunk_axes(data, out, old_dim, new_dim):
    """data's axes in the order of out's (data's `old_dim` where out has `new_dim`)."""
    perm = []
    for i, tag in enumerate(out.dim_tags):
        if i == out.batch_dim_axis:
            perm.append(data.batch_dim_axis)
        else:
            perm.append(data.get_axis_from_description(old_dim if tag == new_dim else tag))
    return perm


def {JOIN_HELPER}(source, self, cache_dim, chunk_dim, out_dim, **_kwargs):
    """The cache's frames, then the chunk's valid frames, then zeros up to N."""
    import tensorflow as tf

    cache = source(0, auto_convert=False, as_data=True)
    x = source(1, auto_convert=False, as_data=True)
    out = self.output
    axis = out.get_axis_from_description(out_dim)
    xs = x.placeholder
    xs = tf.where(x.get_sequence_mask_broadcast(axis=x.get_axis_from_description(chunk_dim)), xs, tf.zeros_like(xs))
    xs = tf.transpose(xs, _join_chunk_axes(x, out, chunk_dim, out_dim))
    cs = tf.transpose(cache.placeholder, _join_chunk_axes(cache, out, cache_dim, out_dim))
    fill = [[0, 0]] * out.batch_ndim
    fill[axis] = [0, out_dim.dimension - cache_dim.dimension - tf.shape(xs)[axis]]
    joined = tf.concat([cs, tf.pad(xs, fill)], axis)
    shape = [None] * out.batch_ndim
    shape[axis] = out_dim.dimension
    return tf.ensure_shape(joined, shape)
'''


@register
class SliceStatic(OpDef):
    """`slice_static(x, axis=kv, start=s, out_axis=win)`: frames [s, s + |win|) of a static dim."""

    name = fn_name = "slice_static"

    def api(self, x, axis, start, out_axis):
        pass

    def infer(self, dt, args, attrs):
        x, a = args[0], attrs
        n = _static(dt, a["axis"], "axis", "slice_static")
        w = _static(dt, a["out_axis"], "out_axis", "slice_static")
        if a["axis"] not in x.dims or a["out_axis"] in x.dims:
            raise DimError(
                f"`slice_static` needs x over `{a['axis']}` and not over `{a['out_axis']}`, got [{', '.join(x.dims)}]"
            )
        s = a["start"]
        if isinstance(s, bool) or not isinstance(s, int) or s < 0 or s + w > n:
            raise DimError(
                f"`slice_static` needs `start` to be an int with 0 <= start and start + |{a['out_axis']}| ({w}) "
                f"<= |{a['axis']}| ({n}), got {s!r}"
            )
        return [OutType(dt.canonical(_renamed(x.dims, a["axis"], a["out_axis"])), x.dtype, x.sparse_dim)]

    def torch(self, ctx, op):
        a = op.attrs
        have = _renamed(ctx.in_dims(0), a["axis"], a["out_axis"])
        cut = f"{ctx.arg(0)}.narrow({ctx.in_dims(0).index(a['axis'])}, {a['start']}, {ctx.size(a['out_axis'])})"
        return align_code(cut, have, op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        return {
            "class": "slice",
            "from": ctx.src(0),
            "axis": ctx.dim(a["axis"]),
            "slice_start": a["start"],
            "slice_end": a["start"] + ctx.size(a["out_axis"]),
            "out_dim": ctx.dim(a["out_axis"]),
        }

    def eager(self, ctx, args, attrs, outs):
        x, a = args[0], attrs
        cut = x.data.narrow(x.dims.index(a["axis"]), a["start"], ctx.size(a["out_axis"]))
        return align_tensor(cut, _renamed(x.dims, a["axis"], a["out_axis"]), outs[0].dims)


@register
class ToChunk(OpDef):
    """`to_chunk(y, axis=frames, like=c)`: y over N static frames as a value over the chunk dim of
    `like` (the first frames, as many as the step's chunk has)."""

    name = fn_name = "to_chunk"
    tensors = ("y", "like")

    def api(self, y, axis, like):
        pass

    def infer(self, dt, args, attrs):
        y, like = args
        n = _static(dt, attrs["axis"], "axis", "to_chunk")
        chunk = [d for d in like.dims if dt[d].max_frames is not None]
        if len(chunk) != 1:
            raise DimError(
                f"`to_chunk` needs `like` over the chunk dim of its chunked loop, got [{', '.join(like.dims)}]"
            )
        if attrs["axis"] not in y.dims or chunk[0] in y.dims:
            raise DimError(
                f"`to_chunk` needs y over `{attrs['axis']}` and not over `{chunk[0]}`, got [{', '.join(y.dims)}]"
            )
        if dt[chunk[0]].max_frames != n:
            raise DimError(
                f"`to_chunk` needs `{attrs['axis']}` to have the chunk's N = {dt[chunk[0]].max_frames} frames, got {n}"
            )
        attrs["chunk"] = chunk[0]
        return [OutType(dt.canonical(_renamed(y.dims, attrs["axis"], chunk[0])), y.dtype, y.sparse_dim)]

    def torch(self, ctx, op):
        # in the loop the chunk dim's padded size is N: the same frames
        a = op.attrs
        return align_code(ctx.arg(0), _renamed(ctx.in_dims(0), a["axis"], a["chunk"]), op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        return {
            "class": "eval",
            "from": [ctx.src(0), ctx.src(1)],
            "eval": Code(TO_CHUNK_HELPER),
            "out_type": Code(TO_CHUNK_TYPE_HELPER),
            "eval_locals": {"frames_dim": ctx.dim(a["axis"]), "chunk_dim": ctx.dim(a["chunk"])},
        }

    def returnn_helpers(self, op):
        return {TO_CHUNK_HELPER: TO_CHUNK_SOURCE}

    def eager(self, ctx, args, attrs, outs):
        y, a = args[0], attrs
        cut = y.data.narrow(y.dims.index(a["axis"]), 0, ctx.size(a["chunk"]))
        return align_tensor(cut, _renamed(y.dims, a["axis"], a["chunk"]), outs[0].dims)


TO_CHUNK_TYPE_HELPER = "to_chunk_type"
TO_CHUNK_HELPER = "to_chunk"
TO_CHUNK_SOURCE = f'''def {TO_CHUNK_TYPE_HELPER}(sources, name, frames_dim, chunk_dim, **_kwargs):
    """The template of N frames as the chunk's: y's, over `like`'s chunk dim tag."""
    y, like = sources[0].output, sources[1].output
    tag = like.dim_tags[like.get_axis_from_description(chunk_dim)]
    out = y.copy_template_replace_dim_tag(axis=y.get_axis_from_description(frames_dim), new_dim_tag=tag)
    return out.copy_template(name="%s_output" % name)


def {TO_CHUNK_HELPER}(source, frames_dim, chunk_dim, **_kwargs):
    """The first frames of y, as many as `like`'s chunk dim has."""
    import tensorflow as tf

    y = source(0, auto_convert=False, as_data=True)
    like = source(1, auto_convert=False, as_data=True)
    n = tf.shape(like.placeholder)[like.get_axis_from_description(chunk_dim)]
    return tf.gather(y.placeholder, tf.range(n), axis=y.get_axis_from_description(frames_dim))
'''
