"""A searched decoder stacking values that combine two layers no step needs (`where(s > 0, s,
0.1 * s)`, a product with a sum over the state), diffgen seeds 500028, 500039. RETURNN moved
their layers out of the searched loop, where one reading two of them found no search choices
("layer <CompareLayer ...> has beam ... but no search choices"); a stacked layer computed from
the choice is collocated with it."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    cross_entropy,
    end,
    full,
    mark_as_loss,
    network,
    reduce_mean,
    reduce_sum,
    tanh,
    where,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
hidden = Dim("hidden", 4)
vocab = Dim("vocab", 5)


@network
def search_stacks_combined(x: Tensor[batch, time, hidden], y: Labels[batch, dec, vocab]):
    c = reduce_mean(x, axis=time)
    s = zeros(batch, hidden)
    label = full(batch, value=0, class_dim=vocab)
    logits, labels, leaky, scaled = [], [], [], []
    for _ in range(x.max_seq_len + 2):
        s = tanh(Linear(hidden)(Embedding(hidden)(label)) + Linear(hidden)(c) + s)
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        leaky.append(where(s > 0.0, s, 0.1 * s))
        scaled.append(reduce_sum(s, axis=hidden) * tanh(Linear(hidden)(s)))
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"labels": labels, "leaky": leaky, "scaled": scaled}
