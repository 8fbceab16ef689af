"""A decoder that appends the encoder loop's final state (made before it, the same value every
step) to a returned list. A sequence of one frame runs both loops one step: eagerly the list's
single item, made in the finished encoder loop of one step, looked like that loop's stack, and
the search's result was taken over the encoder's axis (`verify --seed 2` draws `time` with a
sequence of length 1)."""

from netc import Dim, Embedding, GruCell, Labels, Linear, Tensor, batch, choice, end, full, network, tanh, zeros

dec = Dim("dec")
time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)
vocab = Dim("vocab", 4)


@network
def search_appends_encoder_state(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    h = zeros(batch, hidden)
    for x_t in x:
        h = GruCell(hidden)(Linear(hidden)(x_t), h)
    s = zeros(batch, hidden)
    label = full(batch, value=0, class_dim=vocab)
    labels, ctx = [], []
    for _ in range(x.max_seq_len):
        s = tanh(Linear(hidden)(h) + Linear(hidden)(Embedding(feat)(label)) + s)
        label = choice(Linear(vocab)(s), target=y, beam=2)
        labels.append(label)
        ctx.append(h)
        if end(label == 0):
            break
    return {"labels": labels, "ctx": ctx}
