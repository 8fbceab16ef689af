"""`compact_frames`: a transducer's emitted labels without the blanks (label 0) as a new dim's frames,
and the features where a computed mask holds; no sequence keeps a frame of `none`; each result read
on (a module over the kept frames, a sum over them)."""

from netc import Dim, Labels, Linear, Tensor, batch, compact_frames, network, reduce_sum

time = Dim("time")
feat = Dim("feat", 4)
hid = Dim("hid", 5)
vocab = Dim("vocab", 3)
emitted = Dim("emitted")
kept = Dim("kept")
none = Dim("none")


@network
def compact(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
    labels = compact_frames(y, y != 0, axis=time, out_axis=emitted)
    h = Linear(hid)(x)
    frames = compact_frames(h, reduce_sum(x, axis=feat) > 0.0, axis=time, out_axis=kept)
    nothing = compact_frames(h, reduce_sum(x, axis=feat) > 1e4, axis=time, out_axis=none)  # no frame kept
    return {
        "output": Linear(hid)(frames),
        "labels": labels,
        "total": reduce_sum(frames, axis=kept),
        "nothing": reduce_sum(nothing, axis=none) + 1.0,
    }
