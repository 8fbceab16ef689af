"""Limited-context (chunked) self-attention in whole-sequence form: `chunk_mask`.

Streaming encoders (icefall's streaming Conformer/Zipformer, ESPnet's blockwise attention) run
chunk by chunk at inference, each chunk of N frames attending over itself and a cache of the K
chunks before it; they train on whole sequences with the equivalent mask: query frame t (in
chunk t // N) may attend key frame s when chunk(s) is in [chunk(t) - K, chunk(t)] and s is a
valid frame of the sequence. `chunk_mask` is that mask, [batch, query_axis, kv_axis]; the
energies of the keys it excludes are set very low before the softmax (`where(mask, e, -1e30)`),
which leaves them exactly no weight. N and K are compile-time ints, so every target builds the
mask from positions: torch `arange` and `//` (a module-level helper), RETURNN `range_in_axis`, `eval`, `compare` and
`combine` layers in a `subnetwork`.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.align import align_code, align_tensor
from netc.ops.base import OpDef, OutType, register

# positions are int32 in RETURNN (and below 2**31 everywhere): a chunk size or left context at least
# this large means the same as this, and keeps the constants within TF's int32
_INT32_MAX = 2**31 - 1


def _sizes(attrs) -> tuple[int, int | None]:
    k = attrs["left_chunks"]
    return min(attrs["chunk_size"], _INT32_MAX), None if k is None else min(k, _INT32_MAX)


CHUNK_HELPER = "chunk_window"


def _chunk_helper(name: str) -> str:
    return f'''def {name}(q_size: int, kv_size: int, chunk_size: int, left_chunks: int, device: torch.device):
    """[q_size, kv_size]: key s in query t's chunk or the `left_chunks` chunks before it (-1: any before)."""
    diff = (torch.arange(q_size, device=device) // chunk_size)[:, None] - (
        torch.arange(kv_size, device=device) // chunk_size
    )[None, :]
    if left_chunks < 0:
        return diff >= 0
    return (diff >= 0) & (diff <= left_chunks)
'''


def _static_int(name: str, v, least: int, what: str) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise DimError(f"`chunk_mask` needs `{name}` to be {what}, got {v!r}")


@register
class ChunkMask(OpDef):
    """`chunk_mask(query_axis=time, kv_axis=kv_time, chunk_size=N, left_chunks=K)`: bool [batch,
    time, kv_time], True where key frame s is a valid frame of the sequence and s // N is in
    [t // N - K, t // N] for query frame t (`left_chunks=None`: every chunk up to t's)."""

    name = fn_name = "chunk_mask"
    tensors = ()

    def api(self, query_axis, kv_axis, chunk_size, left_chunks):
        pass

    def infer(self, dt, args, attrs):
        q, kv = attrs["query_axis"], attrs["kv_axis"]
        for k, d in (("query_axis", q), ("kv_axis", kv)):
            if not isinstance(d, str) or d not in dt.dims or dt[d].kind != "dynamic":
                raise DimError(f"`chunk_mask` needs `{k}` to be a dynamic dim, got {d!r}")
        if q == kv:
            raise DimError(
                f"`chunk_mask` needs two dims: the keys' view of `{q}` (`replace_dim(x, axis={q}, out_axis=kv_time)`)"
            )
        _static_int("chunk_size", attrs["chunk_size"], 1, "an int >= 1 (frames per chunk)")
        if attrs["left_chunks"] is not None:
            _static_int("left_chunks", attrs["left_chunks"], 0, "an int >= 0 (chunks of left context) or None")
        dt.check_lengths([q, kv], self.fn_name)
        return [OutType(dt.canonical(("batch", q, kv)), "bool")]

    def torch_helpers(self, op):
        return {CHUNK_HELPER: _chunk_helper}

    def torch(self, ctx, op):
        a = op.attrs
        q, kv, (n, k) = a["query_axis"], a["kv_axis"], _sizes(a)
        dims = op.outs[0].dims
        left = -1 if k is None else k
        window = f"{ctx.helper(CHUNK_HELPER)}({ctx.size(q)}, {ctx.size(kv)}, {n}, {left}, {ctx.device})"
        return f"({align_code(window, (q, kv), dims)} & {ctx.mask(kv, dims)})"

    def returnn(self, ctx, op):
        a = op.attrs
        q, kv, (n, k) = a["query_axis"], a["kv_axis"], _sizes(a)
        zeros = {"class": "constant", "value": 0, "dtype": "int32"}
        zeros["shape"] = [ctx.dim("batch"), ctx.dim(q), ctx.dim(kv)]
        deps = [f"base:{s}" for s in dict.fromkeys(ctx.dim_source(d) for d in (q, kv)) if s]
        if deps:  # a dim made by an op or a loop gets its lengths when that layer is built: first
            zeros["shape_deps"] = deps
        both = {"allow_broadcast_all_sources": True}
        diff_ok = "source(0) >= 0" if k is None else f"tf.logical_and(source(0) >= 0, source(0) <= {k})"
        sub = {
            "zeros": zeros,
            "q_pos": {"class": "range_in_axis", "from": "zeros", "axis": ctx.dim(q)},
            "kv_pos": {"class": "range_in_axis", "from": "zeros", "axis": ctx.dim(kv)},
            "q_chunk": {"class": "eval", "from": "q_pos", "eval": f"tf.math.floordiv(source(0), {n})"},
            "kv_chunk": {"class": "eval", "from": "kv_pos", "eval": f"tf.math.floordiv(source(0), {n})"},
            "diff": {"class": "combine", "kind": "sub", "from": ["q_chunk", "kv_chunk"], **both},  # [q, kv]
            "in_context": {"class": "eval", "from": "diff", "eval": diff_ok, "out_type": {"dtype": "bool"}},
            "kv_length": {"class": "length", "from": "zeros", "axis": ctx.dim(kv)},  # [batch]
            "kv_valid": {"class": "compare", "kind": "less", "from": ["kv_pos", "kv_length"], **both},
            "output": {"class": "combine", "kind": "logical_and", "from": ["in_context", "kv_valid"], **both},
        }
        return {"class": "subnetwork", "from": [], "subnetwork": sub}

    def eager(self, ctx, args, attrs, outs):
        import torch

        q, kv, (n, k) = attrs["query_axis"], attrs["kv_axis"], _sizes(attrs)
        diff = torch.arange(ctx.size(q))[:, None] // n - torch.arange(ctx.size(kv))[None, :] // n
        ok = diff >= 0 if k is None else (diff >= 0) & (diff <= k)
        # eager mode runs each sequence alone: all of its key frames are valid
        ok = ok.expand(ctx.size("batch"), *ok.shape)
        return align_tensor(ok, ("batch", q, kv), outs[0].dims)
