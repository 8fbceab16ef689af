"""The core element-wise, creation, structure and reduction ops in one model."""

from netc import (
    Dim,
    Linear,
    Tensor,
    batch,
    concat,
    exp,
    full,
    gelu,
    log,
    log_softmax,
    network,
    ones,
    reduce_max,
    reduce_mean,
    reduce_sum,
    relu,
    sigmoid,
    softmax,
    split,
    sqrt,
    tanh,
)

time = Dim("time")
feat = Dim("feat", 6)
a = Dim("a", 2)
b = Dim("b", 4)
hidden = Dim("hidden", 5)


@network
def core_ops(x: Tensor[batch, time, feat]):
    lo, hi = split(x, [a, b])
    both = concat(hi, lo, tanh(hi))
    pos = exp(Linear(hidden)(both)) + ones(batch, hidden)
    y = log(pos) / full(batch, hidden, value=2.0) - sqrt(pos) * 0.5
    z = -gelu(y) + relu(y) * sigmoid(y)
    return {
        "output": z,
        "max_t": reduce_max(z, axis=time),
        "sum_t": reduce_sum(z, axis=[time, hidden]),
        "mean_t": reduce_mean(z, axis=time),
        "soft_t": softmax(z, axis=time),
        "logsoft_t": log_softmax(z, axis=time),
        "logsoft_f": log_softmax(z, axis=hidden),
        "half": 1.0 / (2.0 + exp(z)),
    }
