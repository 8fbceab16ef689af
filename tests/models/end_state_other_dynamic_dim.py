"""A loop with `end` whose state has another dynamic dim (accumulated weights over `time`):
the state is not the unit's `output` (RETURNN would take the loop's lengths from that dim)."""

from netc import Dim, Tensor, batch, dot, end, network, reduce_mean, zeros

time = Dim("time")
model = Dim("model", 6)


@network
def net(x: Tensor[batch, time, model]):
    acc = zeros(batch, time)
    out = []
    for _ in range(4):
        acc = 0.9 * acc + 0.1
        c = dot(acc, x, reduce=time)
        out.append(c)
        if end(reduce_mean(c, axis=model) > 0.2):
            break
    only = zeros(batch, time)  # the loop's one result has `time`: the unit's output is it reduced
    for _ in range(3):
        only = 0.5 * only + 0.2
        if end(reduce_mean(dot(only, x, reduce=time), axis=model) > 0.3):
            break
    return {"weighted": x * acc, "out": out, "only": only}
