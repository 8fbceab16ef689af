"""A fused LSTM loop over a stack with no frame in any sequence (see fused_cells_no_frames.py):
torch's `lstm` refuses a time of 0; h and c are their initial values. Checked eager against torch
(tests/test_models.py): RETURNN's LSTM over no frame gives another h (a known bug)."""

from netc import Dim, Linear, LstmCell, Tensor, batch, end, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def net(x: Tensor[batch, time, feat]):
    start = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    k = zeros(batch)
    frames = []
    for _step in range(3):
        k = k + 1.0
        if end(k > 0.5):  # at the first step for every sequence
            break
        frames.append(tanh(Linear(hidden)(start) + k))
    h = start
    c = tanh(start * 2.0)
    for f in frames:
        h, c = LstmCell(hidden)(f, (h, c))
    return {"h": h, "c": c}
