"""A loop's step adds a whole sequence it does not step over (`enc`, [batch, time, hidden]) to a
value of the step ([batch, hidden]) and only stacks the sum, as a transducer's joint network in its
prediction loop does: the sum runs after the loop over the stacked frames, `enc` repeated along the
loop's axis (it stayed in the loop, where RETURNN's training moved it out)."""

from netc import Dim, Linear, Tensor, batch, network, tanh, zeros

time = Dim("time")
label_time = Dim("label_time")
feat = Dim("feat", 3)
hidden = Dim("hidden", 4)


@network
def sink_outer_broadcast(x: Tensor[batch, time, feat], y: Tensor[batch, label_time, feat]):
    enc = Linear(hidden)(x)
    h = zeros(batch, hidden)
    out = []
    for y_t in y:
        h = tanh(Linear(hidden)(y_t) + Linear(hidden, with_bias=False)(h))
        out.append(tanh(enc + Linear(hidden, with_bias=False)(h)))  # [batch, time, hidden]
    return {"output": out, "last": h}
