"""After a searched loop, an op over its target's dim (`range_over(dec)` with the stacked
logits, an output of training only), diffgen seed 600036. A search is given no target, and eager
mode, which runs the code after the loop too, knew no length of `dec` there ("no length of dim
dec known here"); it is the steps the search ran, as long as its stacks."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    batch,
    choice,
    cross_entropy,
    end,
    full,
    mark_as_loss,
    network,
    range_over,
    stack,
    tanh,
    where,
    zeros,
)

dec = Dim("dec")
hidden = Dim("hidden", 4)
vocab = Dim("vocab", 5)


@network
def search_target_dim_after_loop(y: Labels[batch, dec, vocab]):
    s = zeros(batch, hidden)
    label = full(batch, value=0, class_dim=vocab)
    logits, labels = [], []
    for _ in range(4):
        s = tanh(Linear(hidden)(Embedding(hidden)(label)) + Linear(hidden, with_bias=False)(s))
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    early = where(range_over(dec) < 2, stack(logits), 0.5 * stack(logits))
    return {"labels": labels, "early": early}
