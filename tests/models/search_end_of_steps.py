"""A `choice` decoder whose `end` does not depend on the chosen labels (a count of steps): RETURNN's
search asserted that the end layer's dependencies reach the choice (it takes the beam the
hypotheses end in from them); netc's end layer reads the choice through a comparison that never
holds."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    argmax,
    batch,
    choice,
    concat,
    cross_entropy,
    end,
    mark_as_loss,
    network,
    reduce_mean,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
emb = Dim("emb", 3)
hidden = Dim("hidden", 6)


@network
def end_of_steps(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    context = reduce_mean(tanh(Linear(hidden)(x)), axis=enc_time)
    s = zeros(batch, hidden)
    n = zeros(batch)
    label = argmax(zeros(batch, vocab), axis=vocab)
    logits, labels = [], []
    for _ in range(2 * x.max_seq_len):
        s = tanh(Linear(hidden)(concat(Embedding(emb)(label), s)) + context)
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        n = n + 1.0
        if end(n >= 3.0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "logits": logits}
