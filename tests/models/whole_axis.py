"""Loops that read their own axis whole: attention of each frame over all frames."""

from netc import Dim, Linear, Tensor, batch, dot, network, reduce_sum, softmax, tanh, zeros

time = Dim("time")
feat = Dim("feat", 6)


@network
def whole(x: Tensor[batch, time, feat]):
    keys = Linear(feat)(x)
    acc = 0.0 * reduce_sum(x, axis=feat)  # [batch, time]: accumulated attention weights
    h = zeros(batch, feat)
    out = []
    back = []
    for x_t in x:
        w = softmax(dot(Linear(feat)(x_t) + h, keys, reduce=feat) + acc, axis=time)
        acc = acc + w
        h = tanh(dot(w, x, reduce=time) + Linear(feat, with_bias=False)(h))
        out.append(h)
    for x_t in reversed(x):
        v = softmax(dot(x_t, x, reduce=feat), axis=time)
        back.append(dot(v, keys, reduce=time))
    inner = []
    for x_t in x:
        s = zeros(batch, feat)
        for y_t in x:  # a full pass over the frames for every frame
            s = tanh(s + x_t * y_t)
        inner.append(s)
    return {"output": out, "acc": acc, "last_w": w, "back": back, "inner": inner}
