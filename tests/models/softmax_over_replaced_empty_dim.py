# diffgen seed 300149, shrunk: a softmax over a dim `replace_dim` made from one `slice_frames`
# made, where a sequence may have no frame: the copy did not carry "may be empty", so RETURNN
# took a softmax over no frame (inf) where eager and torch give zeros.
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 6)
hidden = nc.Dim("hidden", 6)
sliced = nc.Dim("sliced")
keys = nc.Dim("keys")


@nc.network
def net(x: nc.Tensor[time, batch, feat]):
    enc = nc.Lstm(hidden, direction=-1)(x)
    k = nc.replace_dim(nc.slice_frames(enc, axis=time, start=2, out_axis=sliced), axis=sliced, out_axis=keys)
    h = nc.zeros(batch, hidden)
    acc = nc.zeros(batch, keys)
    for _ in x:
        acc = acc + nc.softmax(nc.dot(k, h, reduce=hidden), axis=keys)
        ctx = nc.dot(acc, k, reduce=keys)
    return {"ctx": ctx}
