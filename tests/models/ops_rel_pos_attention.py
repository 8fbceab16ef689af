"""Self-attention with relative positional encoding (Transformer-XL style, as the Conformer's
`RelPosSelfAttention` of RETURNN's frontend without its position biases): a sinusoidal
encoding of `rel_positions`, position scores brought to [batch, time, kv_time, heads] by
`rel_shift`, on a batch with unequal lengths."""

from netc import (
    Dim,
    Linear,
    Tensor,
    batch,
    concat,
    cos,
    dot,
    exp,
    expand,
    merge_dims,
    network,
    range_over,
    rel_positions,
    rel_shift,
    replace_dim,
    sin,
    softmax,
    split_dims,
)

time = Dim("time")
kv_time = Dim("kv_time")
rel_time = Dim("rel_time")
feat = Dim("feat", 6)
half = Dim("half", 3)
heads = Dim("heads", 2)
head_feat = Dim("head_feat", 3)

LOG_STEP = -2.0 * 9.210340371976184 / 6  # -2 log(10000) / |feat|
SCALE = 3**-0.5


def rel_pos_encoding():
    rel = rel_positions(axis=time, out_axis=rel_time, dtype="float32")  # [batch, rel_time]: -(n-1) .. n-1
    angles = expand(rel, half) * exp(range_over(half, dtype="float32") * LOG_STEP)  # [batch, rel_time, half]
    return concat(sin(angles), cos(angles))  # [batch, rel_time, half+half]


def heads_of(v):
    return split_dims(v, axis=feat, dims=(heads, head_feat))


@network
def rel_pos_attention(x: Tensor[batch, time, feat]):
    x_kv = replace_dim(x, axis=time, out_axis=kv_time)
    q = heads_of(Linear(feat)(x))  # [batch, time, heads, head_feat]
    k = heads_of(Linear(feat)(x_kv))  # [batch, kv_time, heads, head_feat]
    v = heads_of(Linear(feat)(x_kv))
    enc = rel_pos_encoding()
    pos = heads_of(Linear(feat, with_bias=False)(enc))  # [batch, rel_time, heads, head_feat]
    content = dot(q, k, reduce=head_feat)  # [batch, time, kv_time, heads]
    position = rel_shift(dot(q, pos, reduce=head_feat), axis=rel_time, query_axis=time, kv_axis=kv_time)
    w = softmax((content + position) * SCALE, axis=kv_time)
    att = merge_dims(dot(w, v, reduce=kv_time), dims=(heads, head_feat), out_dim=feat)
    return {"output": Linear(feat)(att), "position": position, "enc": enc}
