"""Inner loops whose result only a stack of the outer loop reads, reading values of the outer step
(its state, its frame): RETURNN moved the inner rec layer out of the outer loop, to run over the
outer loop's stacked frames, and its unit's templates put the outer axis elsewhere than its layers
did (an assertion: "inner_output ... vs output_output"; diffgen seed 382, the first loop). The
inner loop is kept in the outer one."""

from netc import Dim, Linear, Tensor, argmax, batch, network, reduce_mean, reduce_sum, tanh, where, zeros

time = Dim("time")
feat = Dim("feat", 4)
enc = Dim("enc")


@network
def nested_inner_loop_kept(x: Tensor[batch, time, feat], e: Tensor[batch, enc, feat]):
    h = zeros(batch, feat)
    out = []
    for x_t in x:
        h = tanh(Linear(feat)(x_t) + Linear(feat)(h))
        s = zeros(batch, feat)
        inner = []
        for _e_t in x:  # a full pass over the same sequence in every outer step
            s = Linear(feat, with_bias=False)(s)
            inner.append(where(argmax(h, axis=feat) > 2, reduce_sum(x, axis=time), s))
        out.append(reduce_mean(inner, axis=time))
    out2 = []
    for x_t in x:
        s2 = zeros(batch, feat)
        inner2 = []
        for e_t in e:
            s2 = Linear(feat, with_bias=False)(s2)
            inner2.append(where(argmax(x_t, axis=feat) > 2, e_t, s2))
        out2.append(reduce_mean(inner2, axis=enc))
    g = zeros(batch, feat)
    out3 = []
    for x_t in x:
        g = tanh(x_t + g)
        s3 = zeros(batch, feat)
        for _e_t in e:
            s3 = Linear(feat, with_bias=False)(s3)
            a = s3 + reduce_sum(g, axis=feat)
        out3.append(a)
    return {"out": out, "out2": out2, "out3": out3}
