"""A decoder bounded by a twice-pooled encoder's frames that returns only its labels (as an
imported attention decoder whose training output is the `choice`): training's graph is the
target's labels and has no encoder, so verify draws the targets within the bound from the
search's pooled dims."""

from netc import Dim, Embedding, Labels, Linear, Tensor, batch, choice, dot, end, full, max_pool, network, softmax, tanh

time = Dim("time")
half = Dim("half")
quarter = Dim("quarter")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def search_labels_only_pooled_bound(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    enc = max_pool(max_pool(x, axis=time, size=2, out_axis=half), axis=half, size=2, out_axis=quarter)
    label = full(batch, value=0, class_dim=vocab)
    labels = []
    for _ in range(enc.max_seq_len):
        e = Embedding(feat)(label)
        att = softmax(dot(enc, e, reduce=feat), axis=quarter)
        label = choice(Linear(vocab)(tanh(dot(att, enc, reduce=quarter) + e)), target=y, beam=2)
        labels.append(label)
        if end(label == 0):
            break
    return {"labels": labels}
