# diffgen seed 3, shrunk; fails with: traceback returnn: Exception: Tensor{_, [F|F_(N)], ctx=loop(_[B])}: cannot set batch_dim_axis = N
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
model = nc.Dim("model", 5)
enc = nc.Dim("enc")


@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model]):
    p1, q2 = nc.split(nc.Linear(2 * model)(e), 2)
    v4 = p1
    h13 = nc.zeros(batch, feat)
    c14 = nc.zeros(batch, feat)
    out15 = []
    for f12 in v4:
        h13, c14 = nc.LstmCell(feat)(h13, (h13, c14))
        out15.append(c14)
    return {"o1": out15}
