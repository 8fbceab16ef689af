"""A loop inside another over the frames a strided `Conv1d` makes, where a sequence too short
for the filter has none: the inner loop runs no step for it, and its state after the loop is
the initial one (RETURNN: the last frame's gather at position -1 failed in TF)."""

from netc import Conv1d, Dim, Tensor, batch, network, tanh, zeros

time = Dim("time")
enc = Dim("enc")
ctime = Dim("ctime")
feat = Dim("feat", 6)
model = Dim("model", 5)


@network
def nested_loop_no_conv_frame(x: Tensor[batch, time, feat], e: Tensor[batch, enc, model]):
    c = Conv1d(model, filter_size=4, with_bias=False, padding="valid", stride=3)(x, axis=time, out_axis=ctime)
    h = zeros(batch, model)
    for e_t in e:
        s = h
        for c_t in c:
            s = tanh(c_t + s)
        h = tanh(e_t + 0.5 * s)
    return {"output": h}
