"""A fused LSTM loop over a stack with no frame in any sequence (see fused_cells_no_frames.py):
torch's `lstm` refuses a time of 0; h and c are their initial values. And one over a stack with
no frame for the sequence of length 2 only (the others have some): on RETURNN its h and c are
read as the last frames of the `rnn_cell`'s h and c layers, whose initial output must be the
loop's initial state (it was zeros: c differed). The states are not zeros, so RETURNN's native
LSTM is not used."""

from netc import Dim, Linear, LstmCell, Tensor, batch, end, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def net(x: Tensor[batch, time, feat]):
    start = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    n = reduce_sum(reduce_sum(x * 0.0 + 1.0, axis=feat), axis=time)  # 4 per frame
    k = zeros(batch)
    j = zeros(batch)
    frames = []
    some = []
    for _step in range(3):
        k = k + 1.0
        j = j + 4.0
        if end(k > 0.5):  # at the first step for every sequence
            break
        frames.append(tanh(Linear(hidden)(start) + k))
    for _step in range(3):
        j = j + 4.0
        if end(j > n - 2.0):  # at the first step for the sequence of length 2 only
            break
        some.append(tanh(Linear(hidden)(start) + j))
    h = start
    c = tanh(start * 2.0)
    for f in frames:
        h, c = LstmCell(hidden)(f, (h, c))
    h2 = start
    c2 = tanh(start * 2.0)
    for f in some:
        h2, c2 = LstmCell(hidden)(f, (h2, c2))
    return {"h": h, "c": c, "h2": h2, "c2": c2}
