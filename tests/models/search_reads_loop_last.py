"""A decoder reads the last frame of an earlier loop whose own stack is returned: the search
keeps that loop for the frame and drops its stack (a value from before the loop, the same at
every step) (a search returns only the decoder's), so
eager mode, which runs the loop either way, must look its stack up in training's loop (it took
the search's and stacked the returned list over the decoder's dim). Random program seed
900829, reduced."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    concat,
    cross_entropy,
    end,
    full,
    mark_as_loss,
    network,
    reduce_mean,
    tanh,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 3)
hidden = Dim("hidden", 4)
vocab = Dim("vocab", 5)


@network
def search_reads_loop_last(x: Tensor[time, batch, feat], y: Labels[batch, dec, vocab]):
    g = tanh(reduce_mean(x, axis=time))
    hs = []
    for x_t in x:
        last = x_t
        hs.append(g)  # the same value at every step
    s = zeros(batch, hidden)
    label = full(batch, value=0, class_dim=vocab)
    logits, labels, lasts = [], [], []
    for _ in range(6):
        s = tanh(Linear(hidden)(concat(Embedding(feat)(label), last)) + Linear(hidden)(s))
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        lasts.append(last)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"hs": hs, "labels": labels, "lasts": lasts}
