"""A label read after the loop that each step computes from its frame alone: RETURNN takes it as
a previous value (its last frame), and a label needs its initial value given."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
vocab = nc.Dim("vocab", 5)


@nc.network
def last_label_of_frames(x: nc.Tensor[time, batch, feat]):
    for t in range(x.max_seq_len):
        label = nc.argmax(nc.Linear(vocab)(x[t]), axis=vocab)
    return {"last": label}
