"""An unconditional LM sampled from BOS: `choice(..., sample=True)` draws each hypothesis' labels
(seeded), up to its bound; eager mode and torch draw the same labels."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    argmax,
    batch,
    choice,
    concat,
    cross_entropy,
    end,
    mark_as_loss,
    network,
    tanh,
    zeros,
)

dec_time = Dim("dec_time")
vocab = Dim("vocab", 6)
emb = Dim("emb", 4)
hidden = Dim("hidden", 8)
SAMPLES = 3


@network
def lm_sample(y: Labels[batch, dec_time, vocab]):
    h = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)  # BOS
    logits, labels = [], []
    for _ in range(9):
        h = tanh(Linear(hidden)(concat(Embedding(emb)(label), h)))
        scores = Linear(vocab)(h)
        logits.append(scores)
        label = choice(scores, target=y, beam=SAMPLES, sample=True, seed=7)
        labels.append(label)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "logits": logits}
