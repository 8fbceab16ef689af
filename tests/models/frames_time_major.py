"""slice_frames, pad_frames and shift_right of a time-major input (RETURNN slice_nd put the new
lengths on another dim: diffgen seeds 20031, 20404, 20405)."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
frames6 = nc.Dim("frames6")
frames7 = nc.Dim("frames7")


@nc.network
def net(x: nc.Tensor[time, batch, feat]):
    v7 = nc.pad_frames(x, axis=time, left=1, right=2, value=0.5, out_axis=frames6)
    v8 = nc.shift_right(x, axis=time, value=0.25)
    v9 = nc.slice_frames(x, axis=time, start=-2, out_axis=frames7)
    return {"o0": v7, "o1": v8, "o2": v9}
