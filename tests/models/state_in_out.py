"""A state passed in and returned under its input's name (`s`), and targets only a loss reads:
the ONNX graph's output is `s_out`, and `y` is no input of it (tests/test_onnx.py)."""

from netc import Dim, Labels, Linear, Tensor, batch, ctc_loss, mark_as_loss, network, tanh

time = Dim("time")
label_time = Dim("label_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 3)
blank = Dim("blank", 1)


@network
def state_in_out(x: Tensor[batch, time, feat], s: Tensor[batch, feat], y: Labels[batch, label_time, vocab]):
    out = []
    for x_t in x:
        s = tanh(Linear(feat)(x_t) + s)
        out.append(s)
    mark_as_loss(ctc_loss(Linear(vocab + blank)(out), y, axis=vocab + blank), "ctc")
    return {"out": out, "s": s}
