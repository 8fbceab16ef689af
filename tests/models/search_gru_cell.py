"""examples/beam_search.py with a `GruCell` decoder state: trained with teacher forcing, searched
with a beam (RETURNN: its subnetwork runs on every hypothesis)."""

from netc import (
    Dim,
    Embedding,
    GruCell,
    Labels,
    Linear,
    Tensor,
    argmax,
    batch,
    choice,
    concat,
    cross_entropy,
    dot,
    end,
    mark_as_loss,
    network,
    softmax,
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
def gru_search(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)  # BOS: label 0
    logits = []
    labels = []
    for _ in range(2 * x.max_seq_len):
        att = softmax(dot(enc, Linear(hidden)(s), reduce=hidden), axis=enc_time)
        context = dot(att, enc, reduce=enc_time)
        s = GruCell(hidden)(concat(Embedding(emb)(label), context), s)
        scores = Linear(vocab)(concat(s, context))
        logits.append(scores)
        label = choice(scores, target=y, beam=4)
        labels.append(label)
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "logits": logits}
