"""`Bias`: a learned parameter over static dims added to a tensor, as the position biases of
Transformer-XL attention are added to the queries [batch, time, heads, head_feat]; one over a
single dim, one over dims in another order than the tensor's, and one in a loop body."""

from netc import Bias, Dim, Linear, Tensor, batch, network, split_dims, tanh, zeros

time = Dim("time")
feat = Dim("feat", 6)
heads = Dim("heads", 2)
head_feat = Dim("head_feat", 3)


@network
def bias(x: Tensor[batch, time, feat]):
    q = split_dims(Linear(feat)(x), axis=feat, dims=(heads, head_feat))  # [batch, time, heads, head_feat]
    pos_bias_u = Bias((heads, head_feat))(q)
    pos_bias_v = Bias((head_feat, heads))(q)
    shifted = Bias(feat)(x)
    h = zeros(batch, feat)
    out = []
    for x_t in x:
        h = tanh(Bias(feat)(x_t + h))
        out.append(h)
    return {"u": pos_bias_u, "v": pos_bias_v, "shifted": shifted, "output": out}
