"""Two choices in one step, the label first, then a position in the encoder's frames scored from
the state the step began with (it reads nothing of the label). Searching, the position's choice
extends the hypotheses the label's choice made: RETURNN reads its scores through a layer that
also reads the label's choice (`RecLowering._chain_choices`), after the `reinterpret_data` that
makes the frames the feature axis."""

from netc import Dim, Embedding, Labels, Linear, Tensor, batch, choice, dot, end, network, one_hot, tanh, zeros

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 6)
hidden = Dim("hidden", 4)
vocab = Dim("vocab", 5)


@network
def position_from_old_state(
    x: Tensor[feat, batch, time], y: Labels[batch, dec, vocab], align: Labels[batch, dec, time]
):
    s = zeros(batch, hidden)
    labels, positions = [], []
    for _ in range(2 * x.max_seq_len + 2):
        energy = dot(x, Linear(feat)(s), reduce=feat)
        label = choice(Linear(vocab)(s), target=y, beam=3)
        where = choice(energy, target=align, beam=3, input_type="log_prob", length_normalization=False)
        s = tanh(Linear(hidden)(dot(one_hot(where), x, reduce=time)) + Embedding(hidden)(label))
        labels.append(label)
        positions.append(where)
        if end(label == 1):
            break
    return {"output": labels, "positions": positions}
