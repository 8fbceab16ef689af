"""A searched decoder whose state does not read the chosen labels, stacked with a step counter and
read after the loop by two ops and by an `if`. Searched, RETURNN gives such a layer no beam (one
frame per sequence while the loop's lengths are per hypothesis): its stack reads the choice too.
Beside it a state that reads the labels, stacked as each step starts (its previous value). The
values after the loop are training's outputs (a search returns the stacked ones)."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    end,
    network,
    reduce_mean,
    reduce_sum,
    tanh,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 3)
BEAM = 1


@network
def search_state_ignores_label(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    v = reduce_mean(x, axis=time)
    s = zeros(batch, feat)
    n = zeros(batch)
    h = zeros(batch, feat)
    labels, states, steps, before = [], [], [], []
    for _ in range(2 * x.max_seq_len):
        s = tanh(Linear(feat)(v) + Linear(feat)(s))
        n = n + 1.0
        label = choice(Linear(vocab)(s + h), target=y, beam=BEAM)
        before.append(h)
        h = tanh(Embedding(feat)(label) + h)
        labels.append(label)
        states.append(s)
        steps.append(n)
        if end(label == 0):
            break
    ratio = Linear(feat)(s) * Linear(feat, with_bias=False)(s)  # two ops on the state after the loop
    if reduce_sum(s, axis=feat) > 0.0:
        z = s * 2.0
    else:
        z = s - n
    return {"labels": labels, "states": states, "steps": steps, "before": before, "n": n, "ratio": ratio, "z": z}
