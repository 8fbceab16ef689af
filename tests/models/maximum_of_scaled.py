"""`maximum(x * c, x)`: TensorFlow's graph optimizer (grappler's remapper) rewrote it on RETURNN into
`LeakyRelu(x, alpha=c)`, which for c > 1 is x where x > 0 (wrong numbers, no error; diffgen seed
33572 as `maximum(stack(out) * 2.0, stack(out))`). c < 1, the operands swapped, and a broadcast."""

from netc import Dim, Linear, Tensor, batch, maximum, network, reduce_sum, sigmoid

time = Dim("time")
feat = Dim("feat", 4)


@network
def maximum_of_scaled(x: Tensor[batch, time, feat]):
    v = Linear(feat)(x)  # intermediate (not an output): a fetched value would keep the graph apart
    s = sigmoid(Linear(feat)(x))
    r = reduce_sum(v, axis=feat)
    return {
        "up": maximum(v * 2.0, v),
        "swapped": maximum(s, s * 3.0),
        "leaky": maximum(v * 0.1, v),
        "broadcast": maximum(v * 2.0, r),
    }
