"""A searched decoder whose steps `dot` their hypotheses' vectors with values from before the
loop in every form the search lowers: the value second over a static dim (energies), first over a
static dim, second over the dynamic dim (the context: padded frames masked), first over the
dynamic dim (not grouped: masked per hypothesis), and a dot over two dims before the loop."""

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


@network
def search_dots(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    energy_scale = dot(x, x, reduce=[enc_time, feat])  # [batch]: two dims reduced
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)
    logits = []
    labels = []
    for _ in range(x.max_seq_len + 2):
        query = Linear(hidden)(s)
        att = softmax(dot(query, enc, reduce=hidden), axis=enc_time)  # enc second, static dim
        att_2 = softmax(dot(enc, query, reduce=hidden), axis=enc_time)  # enc first, static dim
        context = dot(att, enc, reduce=enc_time)  # enc second, the dynamic dim
        context_2 = dot(enc, att_2, reduce=enc_time)  # enc first, the dynamic dim
        inp = concat(Embedding(emb)(label), context, context_2)
        s = tanh(Linear(hidden)(inp) + Linear(hidden, with_bias=False)(s) + energy_scale * 0.01)
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "logits": logits}
