"""An `if` on the decoder's last label after the searched loop: eagerly the label has a row per
hypothesis there, and the branch is the best hypothesis' (what the search returns)."""

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
    tanh,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
emb = Dim("emb", 3)


@network
def search_if_after_loop(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    label = full(batch, value=0, class_dim=vocab)
    logits, labels = [], []
    for _ in range(12):
        scores = Linear(vocab)(tanh(Linear(feat)(Embedding(emb)(label)) + reduce_mean(x, axis=time)))
        logits.append(scores)
        label = choice(scores, target=y, beam=2)
        labels.append(label)
        if end(label == 0):
            break
    if label != 2:
        z = reduce_mean(x, axis=time)
    else:
        z = reduce_max(x, axis=time)
    return {"labels": labels, "logits": logits, "z": z}
