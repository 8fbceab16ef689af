# diffgen seed 9, shrunk; fails with: traceback returnn: Exception: You must explicitly provide an initial output value for sparse data Tensor{_, [B], dtype=_, sparse_
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 6)
hidden = nc.Dim("hidden", 6)
model = nc.Dim("model", 5)
vocab = nc.Dim("vocab", 5)
dec = nc.Dim("dec")


@nc.network
def net(x: nc.Tensor[time, batch, feat], e: nc.Tensor[batch, time, model], tgt: nc.Labels[batch, dec, vocab]):
    v1 = nc.Linear(model)(x)
    v5 = v1
    v6 = nc.Linear(hidden, with_bias=False)(v5)
    for f7 in nc.unstack(v6, axis=time):
        v9 = nc.clip(f7, -0.5, 0.5)
        lab14 = nc.argmax(nc.Linear(vocab)(nc.tanh(v9)), axis=vocab)
    s = nc.zeros(batch, hidden)
    label = nc.full(batch, value=0, class_dim=vocab)
    logits, labels = ([], [])
    for _ in range(1 * x.max_seq_len + 1):
        scores = nc.Linear(vocab)(s)
        label = nc.choice(scores, target=tgt, beam=2)
        labels.append(label)
        if nc.end(label == 0):
            break
    return {"o1": lab14, "labels": labels}
