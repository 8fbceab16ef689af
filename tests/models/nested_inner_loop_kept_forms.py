"""More inner loops that read a value of the outer step and whose result no outer state needs
(see `nested_inner_loop_kept.py`): read after the outer loop, an inner loop with `end`, an outer
loop with `end`, backward loops over inputs with batch last. RETURNN moved each inner rec layer
out of the outer loop: template assertions, or "axis 0 has no dyn size" for the inner `end` loop."""

from netc import Dim, Linear, Tensor, argmax, batch, end, network, reduce_mean, reduce_sum, tanh, where, zeros

time = Dim("time")
feat = Dim("feat", 4)
enc = Dim("enc")


@network
def nested_inner_loop_kept_forms(
    x: Tensor[batch, time, feat],
    e: Tensor[batch, enc, feat],
    xr: Tensor[feat, time, batch],
    er: Tensor[enc, feat, batch],
):
    h = zeros(batch, feat)
    for x_t in x:
        h = tanh(x_t + h)
        s = zeros(batch, feat)
        inner = []
        for e_t in e:
            s = Linear(feat, with_bias=False)(s)
            inner.append(where(argmax(h, axis=feat) > 2, e_t, s))
        r = reduce_mean(inner, axis=enc)  # read after the outer loop

    g = zeros(batch, feat)
    out_end_inner = []
    for x_t in x:
        g = tanh(x_t + g)
        s2 = zeros(batch, feat)
        for _ in range(3):
            s2 = tanh(Linear(feat, with_bias=False)(s2) + g)
            if end(reduce_sum(s2, axis=feat) > 0.0):
                break
        out_end_inner.append(s2)

    k = reduce_mean(x, axis=time)
    out_end_outer = []
    for _ in range(x.max_seq_len):
        k = tanh(Linear(feat)(k))
        s3 = zeros(batch, feat)
        inner3 = []
        for e_t in e:
            s3 = Linear(feat, with_bias=False)(s3)
            inner3.append(where(argmax(k, axis=feat) > 2, e_t, s3))
        out_end_outer.append(reduce_mean(inner3, axis=enc))
        if end(reduce_sum(k, axis=feat) > 0.5):
            break

    q = zeros(batch, feat)
    out_reversed = []
    for x_t in reversed(xr):
        q = tanh(x_t + q)
        s4 = zeros(batch, feat)
        inner4 = []
        for e_t in reversed(er):
            s4 = Linear(feat, with_bias=False)(s4)
            inner4.append(where(argmax(q, axis=feat) > 2, e_t, s4))
        out_reversed.append(reduce_mean(inner4, axis=enc))
    return {"r": r, "out_end_inner": out_end_inner, "out_end_outer": out_end_outer, "out_reversed": out_reversed}
