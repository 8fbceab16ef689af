"""A state that gains one frame per step: `hist = cum_concat(hist, frame, axis=hist_time)` in a
loop, started by `hist = empty(batch, hist_time, feat)` before it (RETURNN's `cum_concat`).

At each step the state holds every frame so far, over a dim of its own (`hist_time`, declared
by the model), whose length is the steps run so far, step included: attention over it
(`softmax(..., axis=hist_time)`, `dot(..., reduce=hist_time)`) sees exactly the frames so far,
so a Transformer decoder runs step by step at linear cost per step. The rules that keep such a
value in its loop are `netc.parser.grow`'s.

RETURNN: the `cum_concat` layer in the rec unit (it keeps the frames as its own state, reorders
them with the beam, and in training RETURNN runs it over the whole sequence, outside the loop);
the state's `empty` start is that layer's own. torch: `torch.cat` of the previous frames and
this one (a search reorders the state with the beam as any state); eager mode likewise.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.base import OpDef, OutType, register


@register
class Empty(OpDef):
    """`empty(*dims)`: a tensor with no frames along its one dynamic dim, the start of a state that
    `cum_concat` grows in a loop (that dim, declared by the model, gets its lengths there)."""

    name = fn_name = "empty"
    tensors = ()
    loop_role = "grow_start"

    def api(self, *dims):
        pass

    def bind(self, args, kwargs):
        if kwargs:
            raise TypeError("empty() takes only dims")
        return [], {"dims": list(args)}

    def infer(self, dt, args, attrs):
        dims = attrs["dims"]
        if not all(isinstance(d, str) and d in dt.dims for d in dims):
            raise DimError("`empty` takes dims")
        if len(set(dims)) != len(dims):
            raise DimError(f"`empty`: a dim appears twice in ({', '.join(dims)})")
        dyn = [d for d in dims if dt[d].kind == "dynamic"]
        if "batch" not in dims or len(dyn) != 1:
            raise DimError(
                "`empty(batch, hist_time, ...)` takes the batch, one dynamic dim (the one the state grows "
                f"along) and static dims; got ({', '.join(dims)})"
            )
        if dyn[0] not in dt.growing:  # several states may grow along one dim (keys and values)
            dt.make_lengths(dyn[0], "empty")
            dt.growing.add(dyn[0])
        attrs["axis"] = dyn[0]
        return [OutType(dt.canonical(dims))]

    def returnn(self, ctx, op):
        return None  # the `cum_concat` layer starts from no frames itself: no layer (see the emitter)

    def torch(self, ctx, op):
        out = op.outs[0]
        shape = ", ".join("0" if d == op.attrs["axis"] else ctx.size(d) for d in out.dims)
        return f"torch.zeros(({shape}), dtype={ctx.float_dtype}, device={ctx.device})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        return torch.zeros(tuple(0 if d == attrs["axis"] else ctx.size(d) for d in outs[0].dims))

    def eager_lengths(self, attrs, outs, result) -> dict[str, int]:
        return {attrs["axis"]: 0}


@register
class CumConcat(OpDef):
    """`cum_concat(state, frame, axis=hist_time)`: the state's frames and then `frame`, along
    `axis`; in a loop, `hist = cum_concat(hist, frame, axis=hist_time)` holds every frame so far."""

    name = fn_name = "cum_concat"
    tensors = ("state", "frame")
    pure = False  # it is a state: never moved out of its loop
    same_shape_each_step = False
    preallocates = True
    loop_role = "grow"

    def api(self, state, frame, axis):
        pass

    def infer(self, dt, args, attrs):
        state, frame = args
        axis = attrs["axis"]
        if not isinstance(axis, str) or axis not in state.dims:
            raise DimError(
                f"`cum_concat` needs `axis` to be the dim the state grows along, a dim of [{', '.join(state.dims)}]"
            )
        want = dt.canonical((*frame.dims, axis))
        if axis in frame.dims or want != state.dims:
            raise DimError(
                f"`cum_concat` appends a frame with the state's dims but `{axis}`: the state is "
                f"[{', '.join(state.dims)}], the frame [{', '.join(frame.dims)}]"
            )
        if state.dtype != "float32" or frame.dtype != "float32":
            raise DimError(f"`cum_concat` grows float tensors, got {state.dtype} and {frame.dtype}")
        return [OutType(state.dims)]

    def returnn(self, ctx, op):
        # the layer holds the frames so far itself (`prev:` of the state is never read)
        return {"class": "cum_concat", "from": ctx.src(1), "out_spatial_dim": ctx.dim(op.attrs["axis"])}

    def torch_made_dims(self, ctx, op) -> dict[str, tuple[str, str]]:
        axis = op.attrs["axis"]
        n = f"{ctx.arg(0)}.shape[{op.outs[0].dims.index(axis)}] + 1"
        return {axis: (f"torch.full(({ctx.size('batch')},), {n}, dtype=torch.long, device={ctx.device})", n)}

    def torch(self, ctx, op):
        dims = op.outs[0].dims
        return f"torch.cat([{ctx.arg(0)}, {ctx.aligned(1, dims)}], dim={dims.index(op.attrs['axis'])})"

    def torch_preallocated(self, ctx, op, step):
        dims = op.outs[0].dims
        pos = dims.index(op.attrs["axis"])
        # the frame with a size-1 axis where it goes
        return f"{ctx.arg(0)}.index_copy({pos}, {step}.reshape(1), {ctx.aligned(1, dims)})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        from netc.ops.align import align_tensor

        dims = outs[0].dims
        state, frame = args[0].data, align_tensor(args[1].data, args[1].dims, dims)
        rows = max(state.shape[0], frame.shape[0])  # batch is first: one row broadcasts to a search's rows
        state = state.expand(rows, *state.shape[1:])
        frame = frame.expand(rows, *frame.shape[1:])
        return torch.cat([state, frame], dim=dims.index(attrs["axis"]))

    def eager_lengths(self, attrs, outs, result) -> dict[str, int]:
        return {attrs["axis"]: result.shape[outs[0].dims.index(attrs["axis"])]}
