"""Hard attention with fertility, as RETURNN's latent attention configs: a state over the
encoder's frames (`acc`, the positions chosen so far) depends on the step's first choice only and
feeds the energies before it; after the position is chosen, a window from it over those same
energies gives the context. RETURNN's search compared the previous step's two choices through
the energies and failed ("Search choices cannot be compared") before the choice-order rule."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    dot,
    end,
    expand,
    mask_inf,
    network,
    one_hot,
    range_over,
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
def window_over_state(
    x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab], align: Labels[batch, dec_time, enc_time]
):
    enc = tanh(Linear(model)(x))
    s = zeros(batch, model)
    acc = zeros(batch, enc_time)  # each frame's fertility so far
    labels, positions = [], []
    for _ in range(x.max_seq_len + 2):
        keys = tanh(Linear(model)(s) + enc + Linear(model)(expand(acc, feat)))
        energy = dot(keys, Linear(model)(s), reduce=model)
        where = choice(energy, target=align, beam=3)
        window = mask_inf(energy, range_over(enc_time) < where)  # from the chosen frame on
        frame = dot(softmax(window, axis=enc_time), enc, reduce=enc_time)
        s = tanh(Linear(model)(frame) + Linear(model, with_bias=False)(s))
        label = choice(Linear(vocab)(s), target=y, beam=3)
        s = s + Embedding(model)(label)
        acc = acc + 0.5 * one_hot(where)
        labels.append(label)
        positions.append(where)
        if end(label == 0):
            break
    return {"output": labels, "positions": positions}
