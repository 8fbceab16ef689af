"""The search benchmark's decoder: `examples/beam_search.py` at the benchmark's dims (D512,
vocabulary 1000), searched with a beam of 12; at most one step per encoder frame."""

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
feat = Dim("feat", 512)
vocab = Dim("vocab", 1000)
emb = Dim("emb", 128)
hidden = Dim("hidden", 512)
key = Dim("key", 512)
EOS = 0


@network
def search(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    keys = Linear(key)(enc)
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)  # BOS: label 0
    logits = []
    labels = []
    for _ in range(x.max_seq_len):
        att = softmax(dot(keys, Linear(key)(s), reduce=key), axis=enc_time)
        context = dot(att, enc, reduce=enc_time)
        s = tanh(Linear(hidden)(concat(Embedding(emb)(label), context)) + Linear(hidden, with_bias=False)(s))
        scores = Linear(vocab)(concat(s, context))
        logits.append(scores)
        label = choice(scores, target=y, beam=12)
        labels.append(label)
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels}
