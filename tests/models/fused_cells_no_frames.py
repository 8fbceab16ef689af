"""Fused GRU loops (forward and backward) over a stack with no frame in any sequence:
a loop with `end` whose appends stand after the `break` ends at its first step everywhere (diffgen
seed 900552). torch's RNN ops refuse a time of 0 (and packing an empty batch): each cell's result
is its initial state. (Its stacks are not returned: stacking no frame at all fails in torch's
unfused loops and RETURNN's `rec` layers, a separate bug. The LSTM's case: fused_lstm_no_frames.py.)"""

from netc import Dim, GruCell, Linear, Tensor, batch, end, network, reduce_sum, stack, tanh, zeros

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
    g = start
    for f in stack(frames):
        g = GruCell(hidden)(f, g)
    b = start
    for f in reversed(stack(frames)):
        b = GruCell(hidden)(f, b)
    return {"g": g, "b": b}
