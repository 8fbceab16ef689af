"""Tensor `if`s on the decoder's state after the searched loop (it reads the chosen labels), an
`elif` on it and a step counter, and in a later loop reading it: eagerly a searched value has a
row per hypothesis there, and each `if` takes the best hypothesis' branch. Searched, only the
labels are returned; the values after the loop are training's outputs."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    end,
    full,
    network,
    reduce_max,
    reduce_mean,
    reduce_sum,
    tanh,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def search_state_if_after_loop(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    label = full(batch, value=0, class_dim=vocab)
    s = zeros(batch, feat)
    n = zeros(batch)
    labels = []
    for _ in range(x.max_seq_len):
        s = tanh(Linear(feat)(Embedding(feat)(label)) + s + reduce_mean(x, axis=time))
        n = n + 1.0
        label = choice(Linear(vocab)(s), target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    if reduce_sum(s, axis=feat) > 0:
        z = reduce_mean(x, axis=time) + s
    elif reduce_sum(s, axis=feat) + n > 1.0:
        z = s * n
    else:
        z = reduce_max(x, axis=time) - s
    h = z
    outs = []
    for x_t in x:
        if reduce_sum(h * x_t, axis=feat) > 0:
            h = tanh(Linear(feat)(x_t) + h)
        else:
            h = tanh(Linear(feat)(x_t) - h)
        outs.append(h)
    return {"labels": labels, "z": z, "outs": outs}
