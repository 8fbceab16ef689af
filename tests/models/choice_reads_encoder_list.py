"""A decoder that reads the encoder's stacked list in its step, with targets longer than their
encoder (`dec` is declared first: verify draws it longest): eagerly the list is not the
decoder's own stack read after its loop stopped early."""

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
    reduce_mean,
    stack,
    tanh,
    zeros,
)

dec = Dim("dec")
time = Dim("time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def choice_reads_encoder_list(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    h = zeros(batch, feat)
    enc = []
    for x_t in x:
        h = tanh(Linear(feat)(x_t) + h)
        enc.append(h)
    label = full(batch, value=0, class_dim=vocab)
    labels = []
    for _ in range(20):
        ctx = reduce_mean(stack(enc), axis=time)
        label = choice(Linear(vocab)(ctx + Embedding(feat)(label)), target=y, beam=2)
        labels.append(label)
        if end(label == 0):
            break
    return {"labels": labels}
