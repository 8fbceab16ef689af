"""One choice whose scores come from attention on the previous decoder state alone (the state is
updated after the attention, from the previous label), and an int state of the labels (the
largest so far). RETURNN finds the choice's dependency on the previous step's only through that
state, which it may not have resolved where it compares the label with the previous one (a
state computed from both: "Search choices cannot be compared"): the scores also read the
previous label's choice directly, through zeros computed from its `prev:` layer
(`RecLowering._chain_choices`). From the generator's seed 715 (search-heavy features)."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    concat,
    dot,
    end,
    full,
    maximum,
    network,
    softmax,
    tanh,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 6)
hidden = Dim("hidden", 4)
emb = Dim("emb", 3)
small = Dim("small", 3)


@network
def scores_from_prev_state(x: Tensor[batch, time, feat], y: Labels[batch, dec, small]):
    enc = tanh(Linear(feat)(x))
    s = zeros(batch, hidden)
    label = full(batch, value=0, class_dim=small)
    top = full(batch, value=-1, dtype="int32")
    labels, tops = [], []
    for _ in range(x.max_seq_len + 2):
        att = softmax(dot(enc, Linear(feat)(s), reduce=feat), axis=time)
        ctx = dot(att, enc, reduce=time)
        s = tanh(Linear(hidden)(concat(Embedding(emb)(label), ctx)) + Linear(hidden, with_bias=False)(s))
        label = choice(Linear(small)(ctx), target=y, beam=3)
        top = maximum(label, top)
        tops.append(top + 1)
        labels.append(label)
        if end(label == 0):
            break
    return {"output": labels, "tops": tops}
