"""A loop-invariant value stacked in a loop with `end` (RETURNN: the stack over the loop's new axis)."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_max, reduce_sum, tanh

time = Dim("time")
feat = Dim("feat", 5)


@network
def invariant_end_stack(x: Tensor[batch, time, feat]):
    m = reduce_sum(x, axis=time)
    h = reduce_max(x, axis=time)
    out = []
    for _ in range(2 * x.max_seq_len):
        w = tanh(Linear(feat)(m))
        h = tanh(Linear(feat)(h))
        out.append(w)
        if end(reduce_sum(h, axis=feat) > 1.0):
            break
    return {"output": out, "h": h}
