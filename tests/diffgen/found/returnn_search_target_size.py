# diffgen seed 10951 (green features), hand-reduced: netc verify --search fails on RETURNN: You must feed a value for placeholder tensor 'extern_data/placeholders/tgt/tgt_dim0_size'
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 4)
hidden = nc.Dim('hidden', 4)
model = nc.Dim('model', 6)
vocab = nc.Dim('vocab', 5)
emb = nc.Dim('emb', 3)
dec = nc.Dim('dec')

@nc.network
def net(x: nc.Tensor[batch, time, feat], tgt: nc.Labels[batch, dec, vocab]):
    p1 = nc.tanh(nc.Linear(feat)(x))
    v4 = nc.where(p1 > 0.0, p1, 0.1 * p1)
    s = nc.zeros(batch, hidden)
    label = nc.argmax(nc.zeros(batch, vocab), axis=vocab)
    logits, labels = ([], [])
    for _ in range(1 * x.max_seq_len + 2):
        att = nc.softmax(nc.dot(v4, nc.Linear(feat)(s), reduce=feat), axis=time)
        context = nc.dot(att, v4, reduce=time)
        s = nc.tanh(nc.Linear(hidden)(nc.concat(nc.Embedding(emb)(label), context)) + nc.Linear(hidden, with_bias=False)(s))
        scores = nc.Linear(vocab)(s)
        logits.append(scores)
        label = nc.choice(scores, target=tgt, beam=3)
        labels.append(label)
        if nc.end(label == 0):
            break
    nc.mark_as_loss(nc.cross_entropy(logits, tgt, axis=vocab), 'dec_ce')
    return {'labels': labels, 'logits': logits}
