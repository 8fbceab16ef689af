# diffgen seed 18, shrunk; fails with: traceback returnn: AssertionError: Tensor{_, [B,F|F_(N)]}: invalid perm [Dim{B}, Dim{_[B]}, Dim{F_(N)}] length
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
hidden = nc.Dim("hidden", 4)
model = nc.Dim("model", 6)
vocab = nc.Dim("vocab", 5)
emb = nc.Dim("emb", 3)
enc = nc.Dim("enc")
dec = nc.Dim("dec")


@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model], tgt: nc.Labels[batch, dec, vocab]):
    h19 = nc.zeros(batch, feat)
    n27 = nc.zeros(batch)
    out28 = []
    while True:
        n27 = n27 + 1.0
        if nc.end(n27 > 4.5):
            break
        out28.append(h19)
    s = nc.zeros(batch, hidden)
    sc = nc.zeros(batch, hidden)
    label = nc.full(batch, value=0, class_dim=vocab)
    logits, labels = ([], [])
    for _ in range(1 * x.max_seq_len + 2):
        att = nc.softmax(nc.dot(x, nc.Linear(feat)(s), reduce=feat), axis=time)
        context = nc.dot(att, x, reduce=time)
        s, sc = nc.LstmCell(hidden)(nc.concat(nc.Embedding(emb)(label), context), (s, sc))
        scores = nc.Linear(vocab)(s)
        logits.append(scores)
        label = nc.choice(scores, target=tgt, beam=3)
        labels.append(label)
        if nc.end(label == 0):
            break
    return {"o0": out28, "labels": labels, "logits": logits}
