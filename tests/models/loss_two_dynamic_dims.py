"""A loss over a value with two dynamic dims: RETURNN's `as_is` loss flattens one dynamic axis
by its lengths, so the emitter sums the other first (masked) — it once summed its padded frames."""

from netc import Dim, Linear, Tensor, batch, dot, mark_as_loss, network, tanh

time = Dim("time")
enc = Dim("enc")
feat = Dim("feat", 4)
model = Dim("model", 3)


@network
def loss_two_dynamic_dims(x: Tensor[batch, time, feat], e: Tensor[batch, enc, model]):
    scores = tanh(dot(Linear(model)(x), e, reduce=model))  # [batch, time, enc]
    mark_as_loss(scores * scores, "sq")
    return {"scores": scores}
