"""`dot` where one operand's own dim has the size of a dim both share (two dims of size 1: the
heads of one-head attention weights and the dim a `dot` of RETURNN's old form adds): RETURNN's
`var1`/`var2` "auto" matches them as one, so netc names each operand's own dims, and an empty
`var2` gets no dim of size 1 of RETURNN's (`add_var2_if_empty: False`)."""

from netc import Dim, Tensor, batch, dot, expand, network, softmax, split_dims

time = Dim("time")
feat = Dim("feat", 8)
heads = Dim("heads", 1)
one = Dim("one", 1)


@network
def dot_own_dim_size_one(x: Tensor[batch, time, feat]):
    keys = split_dims(x, axis=feat, dims=(heads, feat))
    weights = softmax(expand(keys, one), axis=time)
    return {"output": dot(weights, keys, reduce=time)}
