"""A searched decoder whose state reads the chosen labels, used after the loop by two ops and a
`where`: searched, RETURNN gave the layers after the loop the beam but no search choices. They are
training's outputs; a search returns the stacked labels and states."""

from netc import (
    Dim,
    Embedding,
    GruCell,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    end,
    full,
    network,
    reduce_max,
    where,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 3)
BEAM = 2


@network
def search_state_after_loop(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    label = full(batch, value=0, class_dim=vocab)
    s = zeros(batch, vocab)
    out, states = [], []
    for _ in range(2 * x.max_seq_len):
        s = GruCell(vocab)(Embedding(feat)(label), s)
        label = choice(s, target=y, beam=BEAM)
        out.append(label)
        states.append(s)
        if end(label == 1):
            break
    last = Linear(feat)(s) * Linear(feat, with_bias=False)(s)  # two ops on the state after the search
    picked = where(reduce_max(s, axis=vocab) > 0.5, last + reduce_max(x, axis=time), last * 0.5)
    return {"out": out, "states": states, "last": last, "picked": picked, "kept": where(label == 1, s, -s)}
