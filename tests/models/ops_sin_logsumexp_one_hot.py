"""`sin`, `cos`, `logsumexp` over a static dim, a dynamic dim (padded frames left out) and both,
and `one_hot` of input labels and of `argmax` labels, looped over (also unhoisted)."""

from netc import Dim, Labels, Linear, Tensor, argmax, batch, cos, logsumexp, network, one_hot, sin

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
        steps.append(o_t * 2.0)
    return {
        "output": logsumexp(scores, axis=vocab) - logsumexp(scores * target, axis=vocab),
        "over_time": over_time,
        "over_both": over_both,
        "best": best + target,
        "steps": steps,
    }
