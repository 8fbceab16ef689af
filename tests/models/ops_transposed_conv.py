"""`ConvTranspose1d`: upsampling by transposed convolutions over time, each into a dim of its own
(n*stride frames, plus max(k - stride, 0) with padding "valid"): a filter longer than its stride
("valid": frames past n*stride; "same": TF's crop of the full result at both ends), one as long
as its stride, one shorter than it (zeros after the full result), without bias and into the
input's own feature dim; a loss over the upsampled frames."""

from netc import ConvTranspose1d, Dim, Linear, Tensor, batch, mark_as_loss, network, reduce_sum, tanh

time = Dim("time")
up_valid = Dim("up_valid")
up_same = Dim("up_same")
up_even = Dim("up_even")
up_short = Dim("up_short")
feat = Dim("feat", 3)
hidden = Dim("hidden", 4)


@network
def transposed_convs(x: Tensor[batch, time, feat]):
    h = tanh(Linear(hidden)(x))  # padded frames are not zeros here
    valid = ConvTranspose1d(hidden, 3, stride=2)(h, axis=time, out_axis=up_valid)
    same = ConvTranspose1d(feat, 4, stride=2, padding="same", with_bias=False)(h, axis=time, out_axis=up_same)
    even = ConvTranspose1d(hidden, 3, stride=3, padding="same")(h, axis=time, out_axis=up_even)
    short = ConvTranspose1d(feat, 2, stride=3)(x, axis=time, out_axis=up_short)
    mark_as_loss(reduce_sum(valid * valid, axis=[up_valid, hidden]), "upsampled")
    return {"valid": valid, "same": same, "even": even, "short": short}
