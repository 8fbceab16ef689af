"""Inputs with a dim before batch read by a nested loop, a backward loop, a loop-invariant value
and a loop with `end` (values read after each). RETURNN labelled the last frame of a layer it moved
out of a loop with a template whose dims were in another order (wrong numbers), failed on a
loop-invariant one ("Mismatching shape"), and, without hoisting, built the inner state's template
from its operands in another order than its previous value's (an assertion)."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_mean, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 3)
enc = Dim("enc")
model = Dim("model", 4)


@network
def batch_position_nested(x: Tensor[feat, time, batch], e: Tensor[model, batch, enc]):
    out = []
    for x_t in x:
        s = zeros(batch, model)
        for e_t in e:
            s = tanh(e_t + Linear(model)(x_t) + 0.5 * s)
        a = tanh(s)
        out.append(a)
    m = reduce_mean(x, axis=time)
    for x_t in reversed(x):
        b = tanh(x_t)
        c = tanh(m)
    h = zeros(batch, feat)
    for _ in range(x.max_seq_len):
        h = tanh(Linear(feat)(h) + m)
        d = tanh(h)
        if end(reduce_sum(h, axis=feat) > 0.5):
            break
    return {"out": out, "a": a, "b": b, "c": c, "d": d, "h": h}
