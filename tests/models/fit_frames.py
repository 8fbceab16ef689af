"""`fit_frames`: an upsampled encoder (three frames per pooled one, so as many as the input's or up
to two more) read over the input's frames, each sequence's first ones; combined with a value over
the input's frames (the same size along them in every backend); labels padded by two frames and
read back over their own frames."""

from netc import (
    ConvTranspose1d,
    Dim,
    Labels,
    Linear,
    Tensor,
    batch,
    fit_frames,
    max_pool,
    network,
    pad_frames,
    reduce_sum,
)

time = Dim("time")
feat = Dim("feat", 4)
down = Dim("down")
up = Dim("up")
padded = Dim("padded")
hid = Dim("hid", 5)
vocab = Dim("vocab", 3)


@network
def fit(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
    pooled = max_pool(x, axis=time, size=3, out_axis=down)
    upsampled = ConvTranspose1d(hid, 3, stride=3, padding="same")(pooled, axis=down, out_axis=up)
    frames = fit_frames(upsampled, axis=up, out_axis=time)
    labels = fit_frames(pad_frames(y, axis=time, right=2, value=1, out_axis=padded), axis=padded, out_axis=time)
    summed = frames + Linear(hid)(x)
    return {"output": summed, "total": reduce_sum(frames, axis=time), "labels": labels}
