"""An attention decoder trained with teacher forcing.

Encoder keys are computed once; each decoder step queries them from its state, takes a
softmax over the encoder time axis and a context vector by `dot`; the previous label's
embedding is carried as state. The per-frame cross entropy is the training loss.
"""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    concat,
    cross_entropy,
    dot,
    mark_as_loss,
    network,
    softmax,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("x²", 10)
vocab = Dim("vocab", 12)
emb = Dim("emb", 8)
hidden = Dim("hidden", 16)
key = Dim("key", 16)


@network
def attention(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    keys = Linear(key)(enc)
    s = zeros(batch, hidden)
    prev_emb = zeros(batch, emb)
    logits = []
    for y_t in y:
        query = Linear(key)(s)
        energy = dot(keys, query, reduce=key)
        att = softmax(energy, axis=enc_time)
        context = dot(att, enc, reduce=enc_time)
        s = tanh(Linear(hidden)(concat(prev_emb, context)) + Linear(hidden, with_bias=False)(s))
        logits.append(Linear(vocab)(concat(s, context)))
        prev_emb = Embedding(emb)(y_t)  # teacher forcing: the reference label feeds the next step
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": logits, "state": s}
