"""Self-attention of a sequence over itself outside a loop: `replace_dim` gives the keys and
values a second view of `time` (`kv_time`, the same lengths), so the weights are [batch, time,
kv_time, heads] and a softmax over `kv_time` leaves each sequence's padded keys out; also a
view of the frames made by `slice_frames`."""

from netc import (
    Dim,
    LayerNorm,
    Linear,
    Tensor,
    batch,
    dot,
    merge_dims,
    network,
    replace_dim,
    slice_frames,
    softmax,
    split_dims,
)

time = Dim("time")
kv_time = Dim("kv_time")
but_first = Dim("but_first")
kv_but_first = Dim("kv_but_first")
feat = Dim("feat", 6)
heads = Dim("heads", 2)
head_feat = Dim("head_feat", 3)

SCALE = 3**-0.5


def self_attention(x, axis, kv_axis):
    x_kv = replace_dim(x, axis=axis, out_axis=kv_axis)
    q = split_dims(Linear(feat)(x), axis=feat, dims=(heads, head_feat))  # [batch, axis, heads, head_feat]
    k = split_dims(Linear(feat)(x_kv), axis=feat, dims=(heads, head_feat))  # [batch, kv_axis, heads, head_feat]
    v = split_dims(Linear(feat)(x_kv), axis=feat, dims=(heads, head_feat))
    w = softmax(dot(q, k, reduce=head_feat) * SCALE, axis=kv_axis)  # [batch, axis, kv_axis, heads]
    att = dot(w, v, reduce=kv_axis)  # [batch, axis, heads, head_feat]
    return merge_dims(att, dims=(heads, head_feat), out_dim=feat), w


@network
def attention(x: Tensor[batch, time, feat]):
    h = LayerNorm()(x)
    att, w = self_attention(h, time, kv_time)
    tail = slice_frames(x, axis=time, start=1, out_axis=but_first)
    att_tail, _ = self_attention(tail, but_first, kv_but_first)
    return {"output": x + Linear(feat)(att), "weights": w, "tail": att_tail}
