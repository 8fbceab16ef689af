"""`sin`, `cos`, `logsumexp` over a static dim, a dynamic dim (padded frames left out) and both,
`one_hot` of input labels and of `argmax` labels, looped over (also unhoisted), and `cumsum` over
the dynamic dim (padded frames after the valid ones), over a static dim in the loop and of int32
labels (the local-attention median: the first frame where the running sum passes 0.5)."""

from netc import Dim, Labels, Linear, Tensor, argmax, batch, cast, cos, cumsum, logsumexp, network, one_hot, sin, where

time = Dim("time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def math_ops(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
    h = sin(x) * cos(Linear(feat)(x))
    over_time = logsumexp(h, axis=time)  # [batch, feat]
    over_both = logsumexp(x, axis=[time, feat])  # [batch]
    scores = Linear(vocab)(h)
    target = one_hot(y)  # [batch, time, vocab]
    best = one_hot(argmax(scores, axis=vocab))
    steps = []
    for o_t in target:  # a loop over one_hot's frames (its RETURNN template must know its time axis)
        steps.append(cumsum(o_t * 2.0, axis=vocab))
    running = cumsum(sin(h), axis=time) - 0.5  # [batch, time, feat]
    median = argmax(where(running > 0.0, -running, -1e9), axis=time)  # the first frame past 0.5
    counts = cumsum(cast(y, "int32"), axis=time)  # int32 running sums of the labels
    return {
        "output": logsumexp(scores, axis=vocab) - logsumexp(scores * target, axis=vocab),
        "over_time": over_time,
        "over_both": over_both,
        "best": best + target,
        "steps": steps,
        "running": running * 2.0,
        "median": median,
        "counts": counts,
    }
