"""Inner loops that read an outer loop's state: one steps over it, one starts its own state from
it (RETURNN: `base:prev:a` in the inner unit was a dependency loop)."""

from netc import Dim, Linear, Tensor, batch, network, stack, tanh, zeros

time = Dim("time")
enc_time = Dim("enc_time")
feat = Dim("feat", 5)


@network
def nested_outer_state_in_inner(x: Tensor[batch, time, feat], enc: Tensor[batch, enc_time, feat]):
    a = enc
    a0 = zeros(batch, feat)
    out = []
    for x_t in x:
        col = []
        s = zeros(batch, feat)
        for a_t in a:
            s = tanh(Linear(feat)(a_t) + s + x_t)
            col.append(s)
        a = stack(col)
        run = a0
        for e_t in enc:
            run = tanh(Linear(feat)(e_t) + run)
        a0 = tanh(Linear(feat)(x_t) + run)
        out.append(a0)
    return {"output": out, "a": a}
