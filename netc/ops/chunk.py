"""Chunked loops: `for c in chunks(x, chunk):` steps over chunks of N frames of a dynamic dim.

The parser (`netc.parser.chunk`) writes such a loop as an ordinary loop over a dim of its own
(`<time>_chunks`, ceil(n/N) steps per sequence) with these ops around it:

- `chunk_split(x)` before the loop: x with `time` split into (`<time>_chunks`, `<chunk>_pad`),
  the second static N (each sequence's last chunk filled up with padding); the loop's frame;
- `chunk_lens(x)` before the loop: int32 [batch, <time>_chunks], each chunk's valid frames
  (min(N, n - c*N), 0 past a sequence's last chunk); a second frame of the loop;
- `chunk_frame(raw, lens)` first in the body: the frame over the user's `chunk` dim, a dynamic
  dim whose lengths are this step's `lens` (so reductions, softmax and `dot` over it see only
  the chunk's valid frames, as over any dynamic dim);
- `chunk_pad(y, lens)` in the body, for each appended value over `chunk`: back over the static
  `<chunk>_pad`, so the loop stacks the same shape each step;
- `chunk_merge(ys, x)` after the loop: the stacked chunks back over `time` (x's lengths).

Values over `chunk` exist only in the loop between `chunk_frame` and `chunk_pad` (the parser's
rules); its lengths differ per step, so the hoisting passes keep them there
(`netc.ir.loopkinds.dim_table`). `chunks` itself is a loop iterable (`Chunks`, registered in
`netc.ops.iterables`): its parser rules are `netc.parser.chunk`'s, and eager mode runs it as
Python (`Chunks.eager`: a chunk of this sequence's frames per step).

RETURNN: `chunk_split` is a `window` layer (stride N, the last window padded), `chunk_frame` a
`range_from_length` of the step's lengths (a dim tag whose size is set per step) and a
`gather` of those frames, `chunk_pad` a `gather` at static positions clipped to the valid
frames, `chunk_merge` a `merge_dims` and a `gather` at x's positions along `time` (the dim tag
and lengths of `time` again). torch: a padded reshape before the loop, the step's lengths as
the dim's lengths in the body, a reshape and cut after it.
"""

from __future__ import annotations

import copy

from netc.ir.dims import DimError
from netc.ir.model import DimDef, Graph, Loop, Node, Op
from netc.ir.uses import replace_uses, values_by_id
from netc.naming import Code
from netc.ops.align import align_code
from netc.ops.base import REGISTRY, OpDef, OutType, register
from netc.ops.iterables import BlockStep, EagerLoops, IterableDef, Stacker, register_iterable


@register_iterable
class Chunks(IterableDef):
    """`for c in chunks(x, chunk):` x's frames along `axis` (its one dynamic dim by default) in
    chunks of `chunk.size` frames, each a tensor over `chunk` (a sequence's last chunk shorter)."""

    fn_name = "chunks"
    rules = "netc.parser.chunk"

    @staticmethod
    def api(x, chunk, axis=None):
        return x, chunk, axis

    def eager(self, rt: EagerLoops, x, chunk, axis=None) -> _EagerChunks:
        """Eagerly: a chunk of N frames of this sequence per step (its last chunk shorter), each
        over the dynamic `chunk` dim with the chunk's own length; a list appended over `chunk`
        is stacked back over x's dim (`_stacker`)."""
        if getattr(chunk, "size", None) is None or not hasattr(chunk, "name"):
            raise TypeError("chunks(x, chunk) needs a static Dim for the chunk's frames")
        x = rt.tensor(x)
        return _EagerChunks(rt, x, chunk.name, chunk.size, rt.dynamic_dim(x) if axis is None else axis.name)

    def eager_stacker(self, loop: Loop) -> Stacker | None:
        a = _frame_attrs(loop)
        return None if a is None else _stacker(a["axis"], a["chunk"])

    def stream_axis(self, g: Graph, axis: str) -> str | None:
        return chunks_of(g, axis)

    def stream_steps(self, g: Graph, steps: str) -> tuple[Graph, BlockStep] | None:
        return chunk_steps(g, steps)


def _frame_attrs(loop: Loop) -> dict | None:
    """The attrs of `loop`'s `chunk_frame` (a chunked loop's), else None: what `loopkinds.loop_chunk`
    answers, by the op's own name (`loopkinds` imports the op registry, so this file cannot import it)."""
    return next((n.attrs for n in loop.body if isinstance(n, Op) and n.op == "chunk_frame"), None)


class _EagerChunks:
    def __init__(self, rt: EagerLoops, x, chunk: str, size: int, axis: str):
        self.rt, self.x, self.chunk, self.size, self.axis = rt, x, chunk, size, axis

    def __iter__(self):
        rt = self.rt
        found = [n for n in rt.graph_loops() if (a := _frame_attrs(n)) is not None and a["chunk"] == self.chunk]
        return rt.run_loop(
            found[0].axis if found else f"{self.axis}_chunks", self._frames(), _stacker(self.axis, self.chunk)
        )

    def _frames(self):
        rt, x, n, chunk = self.rt, self.x, self.size, self.chunk
        pos = x.dims.index(self.axis)
        total = x.data.shape[pos]
        have = tuple(chunk if d == self.axis else d for d in x.dims)
        dims = rt.canonical(have)
        perm = [have.index(d) for d in dims]
        for start in range(0, total, n):
            k = min(n, total - start)
            rt.set_length(chunk, k)
            yield rt.frame(x.data.narrow(pos, start, k).permute(perm), dims, x)


def _stacker(axis: str, chunk: str) -> Stacker:
    """A list appended in a chunked loop: values over the chunk dim back over the dim chunked."""

    def stack(datas: list, dims: tuple[str, ...], canonical):
        if chunk not in dims:
            return None
        import torch

        data = torch.cat(datas, dim=dims.index(chunk))
        have = tuple(axis if d == chunk else d for d in dims)
        out = canonical(have)
        return data.permute([have.index(d) for d in out]), out

    return stack


def _replace(dims: tuple[str, ...], old: str, new: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for d in dims for n in ((*new,) if d == old else (d,)))


def _float(op: str, x) -> None:
    if x.dtype != "float32":
        raise DimError(f"`{op}` takes a float tensor, got {x.dtype}")


@register
class ChunkSplit(OpDef):
    """x over `axis` -> over (`out_axis`, `pad`): chunks of `size(pad)` frames (internal)."""

    name = "chunk_split"
    fn_name = None
    tensors = ("x",)

    def makes_dims(self, attrs: dict) -> list[str]:
        return [attrs["out_axis"]]

    def infer(self, dt, args, attrs):
        x = args[0]
        axis, pad, out = attrs["axis"], attrs["pad"], attrs["out_axis"]
        if axis not in x.dims or dt[axis].kind != "dynamic" or "batch" not in x.dims:
            raise DimError(f"`chunks` splits a dynamic dim of a tensor with a batch dim, got [{', '.join(x.dims)}]")
        dt.make_lengths(out, "chunks", may_be_empty=dt[axis].may_be_empty)
        return [OutType(dt.canonical(_replace(x.dims, axis, (out, pad))), x.dtype, x.sparse_dim)]

    def made_lengths(self, attrs, lens):
        n, axis = attrs["size"], attrs["axis"]
        return {attrs["out_axis"]: [-(-k // n) for k in lens[axis]]} if axis in lens else {}

    def torch_made_dims(self, ctx, op) -> dict[str, tuple[str, str]]:
        n, axis = op.attrs["size"], op.attrs["axis"]
        return {op.attrs["out_axis"]: (f"({ctx.seq_lens(axis)} + {n - 1}) // {n}", f"-(-{ctx.size(axis)} // {n})")}

    def torch(self, ctx, op):
        a = op.attrs
        n, dims = a["size"], ctx.in_dims(0)
        pos = dims.index(a["axis"])
        fill = f"{ctx.size(a['out_axis'])} * {n} - {ctx.size(a['axis'])}"
        moved = f"{ctx.arg(0)}.movedim({pos}, -1)"
        split = f"torch.nn.functional.pad({moved}, (0, {fill})).unflatten(-1, ({ctx.size(a['out_axis'])}, {n}))"
        have = (*(d for d in dims if d != a["axis"]), a["out_axis"], a["pad"])
        return align_code(split, have, op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        n = a["size"]
        return {
            "class": "window",
            "from": ctx.src(0),
            "window_size": n,
            "window_left": 0,
            "window_right": n - 1,
            "stride": n,
            "window_dim": ctx.dim(a["pad"]),
            "axis": ctx.dim(a["axis"]),
            "out_spatial_dim": ctx.derived_dim(a["out_axis"]),
        }


@register
class ChunkLens(OpDef):
    """int32 [batch, out_axis]: each chunk's valid frames of x along `axis` (internal)."""

    name = "chunk_lens"
    fn_name = None
    tensors = ("x",)

    def infer(self, dt, args, attrs):
        return [OutType(dt.canonical(("batch", attrs["out_axis"])), "int32")]

    def torch(self, ctx, op):
        a = op.attrs
        n = a["size"]
        steps = f"torch.arange({ctx.size(a['out_axis'])}, device={ctx.seq_lens(a['axis'])}.device)"
        return f"({ctx.seq_lens(a['axis'])}[:, None] - {n} * {steps}[None, :]).clamp(0, {n})"

    def returnn(self, ctx, op):
        a = op.attrs
        return {
            "class": "eval",
            "from": ctx.src(0),
            "eval": Code(CHUNK_LENS_HELPER),
            "eval_locals": {"axis_dim": ctx.dim(a["axis"]), "steps_dim": ctx.dim(a["out_axis"]), "n": a["size"]},
            "out_type": Code(
                f"{{'dims': (batch_dim, {ctx.dim(a['out_axis'])}), 'dtype': 'int32', 'sparse_dim': None}}"
            ),
        }

    def returnn_helpers(self, op):
        return {CHUNK_LENS_HELPER: CHUNK_LENS_SOURCE}


CHUNK_LENS_HELPER = "chunk_lengths"
CHUNK_LENS_SOURCE = f'''def {CHUNK_LENS_HELPER}(source, axis_dim, steps_dim, n, **_kwargs):
    """Each chunk's valid frames: min(n, length - c*n), at least 0 ([batch, steps_dim])."""
    import tensorflow as tf

    x = source(0, auto_convert=False, as_data=True)
    lens = x.get_dynamic_size(x.get_axis_from_description(axis_dim))  # [batch]
    steps = tf.range(steps_dim.get_dim_value())
    return tf.clip_by_value(lens[:, None] - n * steps[None, :], 0, n)
'''


@register
class ChunkFrame(OpDef):
    """The loop's raw frame over `pad` as a frame over the dynamic `chunk`, whose lengths this
    step are `lens` (internal; first in a chunked loop's body)."""

    name = "chunk_frame"
    fn_name = None
    tensors = ("raw", "lens")
    pure = False  # its lengths are the step's: never moved out of the loop
    loop_role = "chunk"

    def infer(self, dt, args, attrs):
        raw = args[0]
        return [OutType(dt.canonical(_replace(raw.dims, attrs["pad"], (attrs["chunk"],))), raw.dtype, raw.sparse_dim)]

    def torch_made_dims(self, ctx, op) -> dict[str, tuple[str, str]]:
        return {op.attrs["chunk"]: (ctx.arg(1), str(op.attrs["size"]))}

    def torch(self, ctx, op):
        a = op.attrs
        return align_code(ctx.arg(0), _replace(ctx.in_dims(0), a["pad"], (a["chunk"],)), op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        return {
            "class": "eval",
            "from": [ctx.src(0), ctx.src(1)],
            "eval": Code(FRAME_HELPER),
            "out_type": Code(FRAME_TYPE_HELPER),
            "eval_locals": {"chunk_dim": ctx.dim(a["chunk"]), "pad_dim": ctx.dim(a["pad"])},
        }

    def returnn_helpers(self, op):
        return {FRAME_TYPE_HELPER: FRAME_TYPE_SOURCE, FRAME_HELPER: FRAME_SOURCE}


# RETURNN: the chunk dim's size is set per step (in the loop's control flow context, as
# `cum_concat` sets its dim's), from the step's lengths; moved out of the loop, from all steps'
FRAME_TYPE_HELPER = "chunk_frame_type"
FRAME_TYPE_SOURCE = f'''def {FRAME_TYPE_HELPER}(sources, network, name, chunk_dim, pad_dim, **_kwargs):
    """The template of a chunk: the raw frame's, over `chunk_dim` (its sizes the step's lengths)."""
    raw, lens = sources[0].output, sources[1].output
    dim = chunk_dim.get_for_batch_ctx(batch=raw.batch, ctx=network.get_control_flow_ctx())
    if dim.dyn_size_ext is None:
        dim.dyn_size_ext = lens.copy_template(name="%s:chunk-size" % name)
    out = raw.copy_template_replace_dim_tag(axis=raw.get_axis_from_description(pad_dim), new_dim_tag=dim)
    return out.copy_template(name="%s_output" % name)
'''
FRAME_HELPER = "chunk_frame"
FRAME_SOURCE = f'''def {FRAME_HELPER}(source, self, chunk_dim, pad_dim, **_kwargs):
    """The step's chunk: the raw frame's first max(lengths) frames; sets the chunk dim's sizes."""
    import tensorflow as tf

    raw = source(0, auto_convert=False, as_data=True)
    lens = source(1, auto_convert=False, as_data=True)
    dim = self.output.dim_tags[self.output.get_axis_from_description(chunk_dim)]
    if dim.dyn_size_ext.placeholder is None:
        dim.dyn_size_ext.placeholder = lens.copy_compatible_to(dim.dyn_size_ext).placeholder
    axis = raw.get_axis_from_description(pad_dim)
    frames = tf.gather(raw.placeholder, tf.range(tf.reduce_max(lens.placeholder)), axis=axis)
    return frames
'''
PAD_HELPER = "chunk_padded"
PAD_TYPE_HELPER = "chunk_padded_type"
PAD_SOURCE = f'''def {PAD_TYPE_HELPER}(sources, name, chunk_dim, pad_dim, **_kwargs):
    """The template of a chunk's value over the static `pad_dim` (N frames)."""
    y = sources[0].output
    out = y.copy_template_replace_dim_tag(axis=y.get_axis_from_description(chunk_dim), new_dim_tag=pad_dim)
    return out.copy_template(name="%s_output" % name)


def {PAD_HELPER}(source, chunk_dim, pad_dim, **_kwargs):
    """A chunk's value filled up with zeros to N frames."""
    import tensorflow as tf

    y = source(0, auto_convert=False, as_data=True)
    axis = y.get_axis_from_description(chunk_dim)
    x = y.placeholder
    fill = [[0, 0]] * y.batch_ndim
    fill[axis] = [0, pad_dim.dimension - tf.shape(x)[axis]]
    shape = x.shape.as_list()
    shape[axis] = pad_dim.dimension
    return tf.ensure_shape(tf.pad(x, fill), shape)
'''


@register
class ChunkPad(OpDef):
    """A value over `chunk` as one over the static `pad` (internal: what a chunked loop stacks)."""

    name = "chunk_pad"
    fn_name = None
    tensors = ("y", "lens")
    pure = False  # stacked per step: never moved after the loop (its input's lengths are per step)

    def infer(self, dt, args, attrs):
        y = args[0]
        return [OutType(dt.canonical(_replace(y.dims, attrs["chunk"], (attrs["pad"],))), y.dtype, y.sparse_dim)]

    def torch(self, ctx, op):
        a = op.attrs
        return align_code(ctx.arg(0), _replace(ctx.in_dims(0), a["chunk"], (a["pad"],)), op.outs[0].dims)

    def returnn(self, ctx, op):
        a = op.attrs
        return {
            "class": "eval",
            "from": [ctx.src(0)],
            "eval": Code(PAD_HELPER),
            "out_type": Code(PAD_TYPE_HELPER),
            "eval_locals": {"chunk_dim": ctx.dim(a["chunk"]), "pad_dim": ctx.dim(a["pad"])},
        }

    def returnn_helpers(self, op):
        return {PAD_HELPER: PAD_SOURCE}


@register
class ChunkMerge(OpDef):
    """Stacked chunks over (`out_axis`, `pad`) back over x's `axis` (internal)."""

    name = "chunk_merge"
    fn_name = None
    tensors = ("ys", "x")

    def infer(self, dt, args, attrs):
        ys = args[0]
        a = attrs
        dims = tuple(d for d in ys.dims if d != a["pad"])
        return [OutType(dt.canonical(_replace(dims, a["out_axis"], (a["axis"],))), ys.dtype, ys.sparse_dim)]

    def torch(self, ctx, op):
        a = op.attrs
        dims = ctx.in_dims(0)
        rest = tuple(d for d in dims if d not in (a["out_axis"], a["pad"]))
        moved = align_code(ctx.arg(0), dims, (*rest, a["out_axis"], a["pad"]))
        # a contiguous copy first (merging the permuted chunks and their frames copies anyway):
        # flatten's check whether they can be a view asks whether there is one chunk, which
        # torch.export would keep as a guard (a batch that fits in one chunk would fail it)
        merged = f"{moved}.clone(memory_format=torch.contiguous_format).flatten(-2)[..., : {ctx.size(a['axis'])}]"
        return align_code(merged, (*rest, a["axis"]), op.outs[0].dims)

    def returnn(self, ctx, op):
        # frame t of x is frame t % N of chunk t // N
        a = op.attrs
        n = a["size"]
        sub = {
            "pos": {"class": "range_in_axis", "from": "data:1", "axis": ctx.dim(a["axis"])},
            "which": {"class": "eval", "from": "pos", "eval": f"source(0) // {n}"},
            "within": {"class": "eval", "from": "pos", "eval": f"source(0) % {n}"},
            "chunks": {"class": "gather", "from": "data:0", "position": "which", "axis": ctx.dim(a["out_axis"])},
            "output": {"class": "gather", "from": "chunks", "position": "within", "axis": ctx.dim(a["pad"])},
        }
        return {"class": "subnetwork", "from": [ctx.src(0), ctx.src(1)], "concat_sources": False, "subnetwork": sub}


# --- streaming (`netc export --streaming`, `netc.stream`)


CHUNK_OPS = ("chunk_split", "chunk_lens", "chunk_frame", "chunk_pad", "chunk_merge")


def chunk_steps(g: Graph, steps: str) -> tuple[Graph, BlockStep] | None:
    """`g` (not changed) with its chunked loop over `steps` as a loop whose frames are the inputs'
    chunks: the dim chunked is (`steps`, `chunk`) everywhere and the chunk's padded form (`pad`)
    is `chunk`, so the chunk ops are the identity and go. A step graph of the result
    (`netc.stream`) takes a chunk of frames and gives per-frame values over `chunk`. Where a pool
    before the loop makes the dim chunked (`frames_per_out`: k input frames a frame), a step's
    input is k*N frames over a dim of their own, pooled in the step. None: not a chunked loop."""
    split = next(
        (n for n in g.body if isinstance(n, Op) and n.op == "chunk_split" and n.attrs["out_axis"] == steps), None
    )
    if split is None:
        return None
    a = split.attrs
    new = {a["axis"]: (steps, a["chunk"]), a["pad"]: (a["chunk"],)}
    plan = BlockStep(a["axis"], steps, a["chunk"], a["chunk"], a["size"], a["size"])
    pool = next((n for n in g.body if isinstance(n, Op) and a["axis"] in REGISTRY[n.op].makes_dims(n.attrs)), None)
    per = None if pool is None else REGISTRY[pool.op].frames_per_out(pool.attrs)
    g = copy.deepcopy(g)
    if per is not None:  # the pool's input frames over a dim of their own in each step
        frames = f"{a['chunk']}_{per[0]}"
        new[per[0]] = (steps, frames)
        plan = BlockStep(per[0], steps, frames, a["chunk"], a["size"] * per[1], a["size"])
        pool = next(n for n in g.body if isinstance(n, Op) and n.outs[0].id == pool.outs[0].id)
        pool.attrs = {**pool.attrs, "axis": frames, "out_axis": a["chunk"]}
        g.dims.append(DimDef(name=frames, kind="dynamic", may_be_empty=True))
    for i in g.inputs:
        i.annotated_dims = _renamed(i.annotated_dims, new)
    for v in values_by_id(g).values():
        v.dims = _renamed(v.dims, new)

    def drop(nodes: list[Node]) -> tuple[list[Node], dict[int, int]]:
        alias, kept = {}, []
        for n in nodes:
            if isinstance(n, Op) and n.op in CHUNK_OPS and n.attrs.get("out_axis") == steps:
                if n.op != "chunk_lens":  # read by `chunk_frame` and `chunk_pad` only (gone)
                    alias[n.outs[0].id] = n.args[0]
                continue
            if isinstance(n, Loop):
                n.seqs = [s for s in n.seqs if not _lens_of(g, s.outer, steps)]
                n.body, inner = drop(n.body)
                for st in n.stacks:
                    st.value = _chase(inner, st.value)
                for last in n.lasts:
                    last.value = _chase(inner, last.value)
                for c in n.carries:
                    c.next = _chase(inner, c.next)
            kept.append(n)
        replace_uses(kept, alias)
        return kept, alias

    g.body, outer = drop(g.body)
    for o in g.outputs:
        o.value = _chase(outer, o.value)
    g.dims = [d for d in g.dims if d.name not in new]
    # a step's tensors have a whole chunk of frames, padded (as the whole-sequence loop has: what
    # reads the chunk with a cache over static dims needs its N frames); their lengths the valid
    for d in g.dims:
        if d.name in (plan.frames, plan.chunk):
            d.size = plan.size if d.name == plan.frames else a["size"]
    return g, plan


def chunks_of(g: Graph, axis: str) -> str | None:
    """The dim of the chunked loop that cuts `axis` into chunks (`--axis time` streams its chunks)."""
    return next(
        (
            n.attrs["out_axis"]
            for n in g.body
            if isinstance(n, Op) and n.op == "chunk_split" and n.attrs["axis"] == axis
        ),
        None,
    )


def _renamed(dims: tuple[str, ...], new: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(n for d in dims for n in new.get(d, (d,)))


def _chase(alias: dict[int, int], v: int) -> int:
    while v in alias:
        v = alias[v]
    return v


def _lens_of(g: Graph, v: int, steps: str) -> bool:
    """Whether `v` is the chunk lengths (`chunk_lens`) of the chunked loop over `steps`."""
    return any(
        isinstance(n, Op) and n.op == "chunk_lens" and n.attrs["out_axis"] == steps and n.outs[0].id == v
        for n in g.body
    )
