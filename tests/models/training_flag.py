"""`training()`: a value that differs in training (zoneout-like state update, feature masking)
from recognition, which `netc verify` runs; `tests/test_modes.py` checks both modes."""

from netc import Dim, Linear, Tensor, batch, network, tanh, training, where, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def train_flag(x: Tensor[batch, time, feat]):
    masked = where(training(), 0.5 * x, x)  # elementwise, over every frame
    h = zeros(batch, hidden)
    out = []
    for x_t in masked:
        new = tanh(Linear(hidden)(x_t) + Linear(hidden, with_bias=False)(h))
        if training():  # zoneout-like: keep a mix of the previous state in training
            h = 0.5 * h + 0.5 * new
        else:
            h = new
        out.append(h)
    return {"output": out, "masked": masked, "last": h}
