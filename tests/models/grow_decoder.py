"""A Transformer-like decoder step by step: self-attention over the labels so far (keys and values
grown by `cum_concat`, reordered with the beam when searching), cross-attention over the
encoder. Verified in training (teacher forcing) and searched."""

import netc as nc
from netc import batch

enc_time = nc.Dim("enc_time")
dec_time = nc.Dim("dec_time")
hist = nc.Dim("hist")
feat = nc.Dim("feat", 5)
model = nc.Dim("model", 6)
vocab = nc.Dim("vocab", 5)


@nc.network
def grow_decoder(x: nc.Tensor[batch, enc_time, feat], y: nc.Labels[batch, dec_time, vocab]):
    enc = nc.tanh(nc.Linear(model)(x))
    keys = nc.empty(batch, hist, model)
    values = nc.empty(batch, hist, model)
    label = nc.full(batch, value=0, class_dim=vocab)
    logits, labels = [], []
    for _ in range(x.max_seq_len + 2):
        e = nc.Embedding(model)(label)
        keys = nc.cum_concat(keys, nc.Linear(model)(e), axis=hist)
        values = nc.cum_concat(values, nc.Linear(model)(e), axis=hist)
        q = nc.Linear(model)(e)
        self_att = nc.dot(nc.softmax(nc.dot(keys, q, reduce=model), axis=hist), values, reduce=hist)
        h = nc.LayerNorm()(e + self_att)
        q2 = nc.Linear(model)(h)
        cross = nc.dot(nc.softmax(nc.dot(enc, q2, reduce=model), axis=enc_time), enc, reduce=enc_time)
        s = nc.tanh(nc.Linear(model)(h + cross))
        scores = nc.Linear(vocab)(s)
        logits.append(scores)
        label = nc.choice(scores, target=y, beam=3)
        labels.append(label)
        if nc.end(label == 0):
            break
    nc.mark_as_loss(nc.cross_entropy(logits, y, axis=vocab), "ce")
    return {"labels": labels, "logits": logits}
