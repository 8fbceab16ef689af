"""Losses made by `expand` of a value with static dims besides batch ([batch, feat]) over a
dynamic dim: an input's, one `max_pool` made, one `pad_frames` made of a `slice_frames` (diffgen
seed 500048). Over a dim an op made, RETURNN's layer had no time axis and the loss could not be
flattened ("Loss flattening not implemented for Tensor{..., [B,'frames'[B],F|F'feat'(4)]}");
see loss_expand_batch_only.py for a [batch] value."""

from netc import (
    Dim,
    Linear,
    Tensor,
    batch,
    expand,
    mark_as_loss,
    max_pool,
    network,
    pad_frames,
    reduce_mean,
    slice_frames,
    tanh,
)

time = Dim("time")
feat = Dim("feat", 4)
pooled = Dim("pooled")
cut = Dim("cut")
padded = Dim("padded")


@network
def loss_expand_static_dims(x: Tensor[batch, time, feat]):
    h = tanh(Linear(feat)(reduce_mean(x, axis=time)))  # [batch, feat]
    mark_as_loss(expand(h, time), "over_time")
    p = max_pool(x, axis=time, size=2, out_axis=pooled)
    mark_as_loss(expand(h, pooled), "over_pooled")
    s = pad_frames(slice_frames(x, axis=time, start=1, out_axis=cut), axis=cut, left=0, right=2, out_axis=padded)
    mark_as_loss(expand(h, padded), "over_padded")
    return {"p": p, "s": s}
