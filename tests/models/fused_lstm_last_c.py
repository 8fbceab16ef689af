"""A fused LSTM loop whose only result is its last cell state `c`, returned as an output: the
output takes the name of the layer giving `c`, not of the native `rec` layer."""

from netc import Dim, LstmCell, Tensor, batch, network, zeros

time = Dim("time")
feat = Dim("feat", 4)
model = Dim("model", 5)


@network
def net(x: Tensor[batch, time, feat]):
    h = zeros(batch, model)
    c = zeros(batch, model)
    for f in x:
        h, c = LstmCell(model)(f, (h, c))
    return {"o0": c}
