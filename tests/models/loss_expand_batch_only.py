"""Losses made by `expand` of a [batch] value over a dynamic dim (an input's, a time-major
input's, one an op made, inside a loop): RETURNN made the new dim the layer's feature axis, and a
loss over it had no time axis to sum the valid frames along ("Loss flattening not implemented",
diffgen seed 235); inside a loop, the new dim put first made the frames' template differ from the
layer RETURNN moved out of the loop (an assertion)."""

from netc import Dim, Linear, Tensor, batch, expand, mark_as_loss, max_pool, network, reduce_mean, reduce_sum, tanh

time = Dim("time")
feat = Dim("feat", 3)
enc = Dim("enc")
pooled = Dim("pooled")


@network
def loss_expand_batch_only(x: Tensor[batch, time, feat], y: Tensor[time, batch, feat], e: Tensor[batch, enc, feat]):
    v = tanh(reduce_sum(Linear(feat)(reduce_mean(x, axis=time)), axis=feat))  # [batch]
    mark_as_loss(expand(v, time), "over_time")  # summed over each sequence's valid frames
    mark_as_loss(expand(v, enc) * reduce_sum(e, axis=feat), "times_frames")
    mark_as_loss(expand(tanh(reduce_sum(reduce_mean(y, axis=time), axis=feat)), time), "time_major")
    p = max_pool(x, axis=time, size=2, out_axis=pooled)
    mark_as_loss(expand(v, pooled), "over_pooled")
    out = []
    for x_t in x:
        w = reduce_sum(x_t, axis=feat)
        out.append(reduce_sum(expand(w, time) * reduce_sum(x, axis=feat), axis=time))
        u = expand(w, enc)
    mark_as_loss(u, "in_loop")
    return {"v": v, "p": p, "out": out}
