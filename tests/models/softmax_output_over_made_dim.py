# diffgen seed 100683, shrunk: a softmax over a dim a valid Conv1d made (some sequence may have
# no frame), returned as it is: its masking layer and the softmax layer both took the output's
# name, and RETURNN found a layer reading itself ("dependency loop on layer 'o0'").
from netc import Conv1d, Dim, Embedding, Labels, Tensor, batch, network, softmax

time = Dim("time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
emb = Dim("emb", 3)
ctime = Dim("ctime")


@network
def net(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
    v = Conv1d(emb, filter_size=4, groups=3, padding="valid", stride=2)(Embedding(emb)(y), axis=time, out_axis=ctime)
    return {"o0": softmax(v, axis=ctime), "x": x}
