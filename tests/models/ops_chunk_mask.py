"""Limited-context self-attention in whole-sequence form: `chunk_mask` gives each query frame
its own chunk and `left_chunks` chunks before it (chunks of `chunk_size` frames; lengths not
multiples of it), the excluded keys' energies are set to -1e30 before the softmax; a second
attention with unlimited left context (`left_chunks=None`) and the mask itself returned; a chunk
larger than int32 (one chunk: every key) and a left context as large."""

from netc import (
    Dim,
    Linear,
    Tensor,
    batch,
    chunk_mask,
    dot,
    merge_dims,
    network,
    replace_dim,
    softmax,
    split_dims,
    where,
)

time = Dim("time")
kv_time = Dim("kv_time")
feat = Dim("feat", 6)
heads = Dim("heads", 2)
head_feat = Dim("head_feat", 3)

SCALE = 3**-0.5


def chunk_attention(x, x_kv, mask):
    q = split_dims(Linear(feat)(x), axis=feat, dims=(heads, head_feat))
    k = split_dims(Linear(feat)(x_kv), axis=feat, dims=(heads, head_feat))
    v = split_dims(Linear(feat)(x_kv), axis=feat, dims=(heads, head_feat))
    energies = where(mask, dot(q, k, reduce=head_feat) * SCALE, -1e30)  # [batch, time, kv_time, heads]
    w = softmax(energies, axis=kv_time)
    return merge_dims(dot(w, v, reduce=kv_time), dims=(heads, head_feat), out_dim=feat)


@network
def chunk_attention_net(x: Tensor[batch, time, feat]):
    x_kv = replace_dim(x, axis=time, out_axis=kv_time)
    mask = chunk_mask(query_axis=time, kv_axis=kv_time, chunk_size=2, left_chunks=1)
    full_left = chunk_mask(query_axis=time, kv_axis=kv_time, chunk_size=3, left_chunks=None)
    return {
        "output": x + chunk_attention(x, x_kv, mask),
        "full_left": chunk_attention(x, x_kv, full_left),
        "mask": mask,
        "one_chunk": chunk_mask(query_axis=time, kv_axis=kv_time, chunk_size=2**40, left_chunks=2**62),
    }
