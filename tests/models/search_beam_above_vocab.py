"""A beam (5) larger than the class dim (3): the first step has 3 continuations; as RETURNN does,
the other hypotheses continue the first with label 0 at score -inf."""

from netc import Dim, Embedding, Labels, Linear, Tensor, batch, choice, end, full, network, reduce_mean, tanh

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 3)


@network
def search_beam_above_vocab(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    m = reduce_mean(x, axis=time)
    label = full(batch, value=0, class_dim=vocab)
    labels = []
    for _ in range(10):
        label = choice(Linear(vocab)(tanh(Embedding(feat)(label) + m)), target=y, beam=5)
        labels.append(label)
        if end(label == 1):
            break
    return {"labels": labels}
