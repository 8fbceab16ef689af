"""A decoder state through `expand` in a loop with `choice`: searching, its rows are the beam's
hypotheses (eager mode once expanded it to one row)."""

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
    expand,
    mark_as_loss,
    network,
    reduce_sum,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 6)
vocab = Dim("vocab", 7)
emb = Dim("emb", 5)
hidden = Dim("hidden", 8)
EOS = 0


@network
def f(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = reduce_sum(tanh(Linear(hidden)(x)), axis=enc_time)
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)
    logits = []
    labels = []
    for _ in range(2 * x.max_seq_len):
        grid = expand(s, feat)  # [batch, feat, hidden]: the state, once per feature
        s = tanh(Linear(hidden)(concat(Embedding(emb)(label), reduce_sum(grid, axis=feat))) + enc)
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=4)
        labels.append(label)
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "logits": logits}
