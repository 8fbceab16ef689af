# diffgen seed 50100 (the transformer ops' features), shrunk by hand: RETURNN AssertionError: cannot match the axes [0, 1, 2] from Tensor{'output_output', [T|'time'[B],B,F|F'feat'(4)]} to Tensor{'out_output', [B,T|'ceil(time/2)'[B],F|F'feat'(4)]}: in a loop, a value over a dim max_pool made (pad_frames' alike) plus the state, stacked; RETURNN moves the combine out of the loop
import netc as nc
from netc import batch
time = nc.Dim('time')
ptime = nc.Dim('ptime')
feat = nc.Dim('feat', 4)

@nc.network
def net(x: nc.Tensor[batch, time, feat]):
    e = nc.max_pool(x, axis=time, size=2, out_axis=ptime)
    h = nc.zeros(batch, feat)
    out = []
    for x_t in x:
        h = nc.tanh(nc.Linear(feat)(x_t) + h)
        out.append(e + h)
    return {'o1': out}
