"""Tied parameters in a searched decoder: the step's scores use the label embedding's weight,
transposed (`Linear(vocab, weight=emb.weight)`), the embedding reads the label `choice` took;
the embedding is also used before the loop (the reference labels, a loss of their own), so the
one variable is read at the top level and in the loop's steps."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    argmax,
    batch,
    choice,
    cross_entropy,
    dot,
    end,
    mark_as_loss,
    network,
    reduce_sum,
    softmax,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 6)
vocab = Dim("vocab", 7)
model = Dim("model", 5)


@network
def tied_decoder(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(model)(x))
    emb = Embedding(model)
    ref = emb(y)  # the embedding at the top level, before the loop
    mark_as_loss(reduce_sum(ref * ref, axis=model) * 0.01, "ref")
    out = Linear(vocab, weight=emb.weight)
    s = zeros(batch, model)
    label = argmax(zeros(batch, vocab), axis=vocab)
    logits = []
    labels = []
    for _ in range(x.max_seq_len + 2):
        att = softmax(dot(s, enc, reduce=model), axis=enc_time)
        context = dot(att, enc, reduce=enc_time)
        s = tanh(emb(label) + Linear(model, with_bias=False)(s) + context)
        scores = out(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "logits": logits}
