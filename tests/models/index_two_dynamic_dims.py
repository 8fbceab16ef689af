"""`s[t]` on a tensor with two dynamic dims: `t` indexes the axis of its loop (eager mode once
asked `s` for its only dynamic dim)."""

from netc import Dim, Linear, Tensor, batch, dot, network, softmax, tanh, zeros

time = Dim("time")
enc_time = Dim("enc_time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat], e: Tensor[batch, enc_time, feat]):
    energy = dot(x, e, reduce=feat)  # [batch, time, enc_time]
    h = zeros(batch, hidden)
    out = []
    for t in range(x.max_seq_len):
        w = softmax(energy[t], axis=enc_time)  # [batch, enc_time]: this frame's row
        h = tanh(Linear(hidden)(x[t]) + Linear(hidden)(dot(w, e, reduce=enc_time)) + h)
        out.append(h)
    return {"output": out}
