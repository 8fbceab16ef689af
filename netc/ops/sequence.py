"""Ops the passes make for whole sequences (no DSL name): the previous frame of a sequence.

`shift_frames(x, axis)`: frame t of the result is frame t-1 of x, frame 0 is zeros. A loop state
that is only the previous frame of a sequence (`prev_emb = Embedding(emb)(y_t)` carried to the
next step, starting at zeros) is this op over the sequence before the loop (`shift_states`).
Frames past a sequence's end never reach its valid frames: they only move later.
"""

from __future__ import annotations

from netc.ir.dims import DimError
from netc.ops.base import OpDef, OutType, register


@register
class ShiftFrames(OpDef):
    name = "shift_frames"

    def infer(self, dt, args, attrs):
        x = args[0]
        axis = attrs["axis"]
        if axis not in x.dims or dt[axis].kind != "dynamic":
            raise DimError(f"`shift_frames` needs dynamic dim `{axis}` in [{', '.join(x.dims)}]")
        return [OutType(x.dims, x.dtype, x.sparse_dim)]

    def returnn(self, ctx, op):
        return {
            "class": "shift_axis",
            "from": ctx.src(0),
            "axis": ctx.dim(op.attrs["axis"]),
            "amount": 1,
            "pad": True,  # with zeros, keeping the dim (its lengths too)
            "adjust_size_info": False,
        }

    def torch(self, ctx, op):
        pos = ctx.axis(0, op.attrs["axis"])
        pad = (0, 0) * (len(ctx.in_dims(0)) - pos - 1) + (1, 0)  # torch pads from the last dim
        index = ", ".join([":"] * pos + [":-1"])
        return f"torch.nn.functional.pad({ctx.arg(0)}, {pad})[{index}]"

    def eager(self, ctx, args, attrs, outs):
        import torch

        x = args[0]
        pos = x.dims.index(attrs["axis"])
        pad = (0, 0) * (len(x.dims) - pos - 1) + (1, 0)
        return torch.nn.functional.pad(x.data, pad).narrow(pos, 0, x.data.shape[pos])
