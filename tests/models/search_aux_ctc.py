"""A `choice` decoder with an auxiliary CTC loss on the encoder: the CTC's `Linear` exists only in
training (a search has no targets, so RETURNN's search network does not build it)."""

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
    ctc_loss,
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
blank = Dim("blank", 1)
emb = Dim("emb", 3)
hidden = Dim("hidden", 6)


@network
def aux_ctc(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    context = reduce_mean(enc, axis=enc_time)
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)
    logits = []
    labels = []
    for _ in range(2 * x.max_seq_len):
        s = tanh(Linear(hidden)(concat(Embedding(emb)(label), s)) + context)
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    mark_as_loss(ctc_loss(Linear(vocab + blank)(enc), y, axis=vocab + blank), "ctc")
    return {"output": labels}
