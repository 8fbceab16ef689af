"""A "same" `Conv1d` (and a `Conv2d`, an `argmax`) over the dim of a strided "valid" one that has
no frame for a short sequence (verify's lengths 7, 6, 2: 3, 2 and 0 frames): eager mode gives the
empty result the targets give."""

from netc import Conv1d, Conv2d, Dim, Tensor, argmax, batch, expand, network

time = Dim("time")
sub = Dim("sub")
feat = Dim("feat", 4)
ch = Dim("ch", 2)


@network
def conv_same_after_empty(x: Tensor[batch, time, feat]):
    h = Conv1d(feat, 3, padding="valid", stride=2)(x, axis=time, out_axis=sub)  # 0 frames if len < 3
    same = Conv1d(feat, 3)(h, axis=sub)
    grid = Conv2d(ch, filter_size=(3, 3))(expand(h, ch), axis=sub, feature_axis=feat)
    return {"same": same, "grid": grid, "best": argmax(same, axis=sub)}
