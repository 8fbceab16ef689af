"""A value bound before a loop with `choice` and assigned after its `break`: in training the
target's last frame is the ending step, so after the loop it is the value from the frame before
(its value before the loop for a target of length 1)."""

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
def beam_search(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)  # BOS: label 0
    logits = []
    labels = []
    q = s * 0.5
    for _ in range(2 * x.max_seq_len):
        att = softmax(dot(enc, Linear(hidden)(s), reduce=hidden), axis=enc_time)
        context = dot(att, enc, reduce=enc_time)
        s = tanh(Linear(hidden)(concat(Embedding(emb)(label), context)) + Linear(hidden, with_bias=False)(s))
        scores = Linear(vocab)(concat(s, context))
        logits.append(scores)
        label = choice(scores, target=y, beam=4)
        labels.append(label)
        if end(label == EOS):
            break
        q = s * 2.0
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "logits": logits, "q": q}
