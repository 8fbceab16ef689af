"""maximum/minimum (tensors and numbers), clip, abs, `**`, split_dims/merge_dims (maxout as
RETURNN's `reduce_out`), dim arithmetic `a + b`, and `zeros`/`full` over dynamic dims and as labels."""

from netc import (
    Dim,
    Embedding,
    Linear,
    Tensor,
    batch,
    clip,
    concat,
    full,
    maximum,
    merge_dims,
    minimum,
    network,
    reduce_max,
    split_dims,
    zeros,
)

time = Dim("time")
feat = Dim("feat", 6)
half = Dim("half", 3)
pieces = Dim("pieces", 2)
heads = Dim("heads", 2)
head_feat = Dim("head_feat", 3)
vocab = Dim("vocab", 4)
emb = Dim("emb", 2)


@network
def elementwise(x: Tensor[batch, time, feat]):
    y = Linear(feat)(x)
    mixed = maximum(x, y) - minimum(x, 0.5) + maximum(-1.0, y) * minimum(x, y)
    bounded = clip(mixed, -1.5, 2.0) + abs(y) ** 2 + abs(x) ** 0.5
    maxout = reduce_max(split_dims(bounded, axis=feat, dims=(half, pieces)), axis=pieces)  # [batch, time, half]
    per_head = split_dims(y, axis=feat, dims=(heads, head_feat))
    merged = merge_dims(per_head * 2.0, dims=(heads, head_feat), out_dim=feat)  # back to y * 2
    swapped = merge_dims(per_head, dims=(head_feat, heads), out_dim=feat)  # another order
    both = concat(maxout, maxout)  # [.., half+half]
    offset = zeros(batch, time, half + half) + 1.0
    bos = Embedding(emb)(full(batch, value=2, class_dim=vocab))
    return {
        "output": maxout,
        "merged": merged,
        "swapped": swapped,
        "both": both + offset,
        "bos": bos,
        "ones_time": full(batch, time, value=3.0),
        "label": full(batch, value=1, class_dim=vocab),
    }
