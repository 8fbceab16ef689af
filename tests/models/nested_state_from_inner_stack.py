"""An outer state that is the stack of an inner loop with its own state, read (as the previous
step's) only by work that feeds a stack."""

from netc import Dim, Linear, Tensor, batch, network, reduce_sum, stack, tanh, zeros

time = Dim("time")
enc_time = Dim("enc_time")
feat = Dim("feat", 5)


@network
def nested_state_from_inner_stack(x: Tensor[batch, time, feat], enc: Tensor[batch, enc_time, feat]):
    a = zeros(batch, enc_time, feat)
    out = []
    for x_t in x:
        col = []
        s = zeros(batch, feat)
        for e_t in enc:
            s = tanh(Linear(feat)(e_t) + s + x_t)
            col.append(s)
        out.append(reduce_sum(a, axis=enc_time))
        a = stack(col)
    return {"output": out, "a": a}
