"""The benchmark's attention decoder: `examples/attention.py` at larger dims, with the key
projection written inside the loop (netc hoists it; a naive hand loop recomputes it per step)."""

from netc import Dim, Embedding, Labels, Linear, Tensor, batch, concat, dot, network, softmax, tanh, zeros

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 512)
vocab = Dim("vocab", 1000)
emb = Dim("emb", 128)
hidden = Dim("hidden", 512)
key = Dim("key", 512)


@network
def attention(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    s = zeros(batch, hidden)
    prev_emb = zeros(batch, emb)
    logits = []
    for y_t in y:
        keys = Linear(key)(enc)  # the same for every step
        query = Linear(key)(s)
        energy = dot(keys, query, reduce=key)
        att = softmax(energy, axis=enc_time)
        context = dot(att, enc, reduce=enc_time)
        s = tanh(Linear(hidden)(concat(prev_emb, context)) + Linear(hidden, with_bias=False)(s))
        logits.append(Linear(vocab)(concat(s, context)))
        prev_emb = Embedding(emb)(y_t)  # teacher forcing: the reference label feeds the next step
    return {"output": logits}
