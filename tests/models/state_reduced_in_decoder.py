"""A decoder state expanded and reduced over its own dim: RETURNN first builds the unit's layers
from a previous value without dims, where the reduce finds no axis, unless the state's initial
value is given. Searched, its target `tgt` is the first input by name: RETURNN must take the batch
size from `x`."""

import netc as nc
from netc import batch

time = nc.Dim("time")
dec = nc.Dim("dec")
feat = nc.Dim("feat", 6)
hidden = nc.Dim("hidden", 6)
emb = nc.Dim("emb", 3)
vocab = nc.Dim("vocab", 5)


@nc.network
def state_reduced_in_decoder(x: nc.Tensor[batch, time, feat], tgt: nc.Labels[batch, dec, vocab]):
    s = nc.zeros(batch, hidden)
    label = nc.full(batch, value=0, class_dim=vocab)
    logits = []
    labels = []
    for _ in range(x.max_seq_len + 2):
        grid = nc.reduce_max(nc.expand(s, emb) + nc.expand(nc.Embedding(emb)(label), hidden), axis=hidden)
        s = nc.tanh(nc.Linear(hidden)(grid) + nc.Linear(hidden, with_bias=False)(s))
        scores = nc.Linear(vocab)(s)
        logits.append(scores)
        label = nc.choice(scores, target=tgt, beam=3)
        labels.append(label)
        if nc.end(label == 0):
            break
    nc.mark_as_loss(nc.cross_entropy(logits, tgt, axis=vocab), "ce")
    return {"labels": labels}
