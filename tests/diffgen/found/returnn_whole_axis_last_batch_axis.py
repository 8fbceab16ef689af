# diffgen seed 67738 (green features), shrunk; failed (also hoisted; the generator saw it with --no-hoist): traceback
# returnn: AssertionError in rec.py:_construct (the state holding `v27`'s last value: its layer's batch axis
# differed from its previous template's). A loop over a made dim reading a value over that whole dim (`v13`), its
# frame expanded over the dim, the last value read after the loop. Fixed: `expand`'s `switch` in a unit puts the
# new dim last (a `transpose`), as in the layer RETURNN moves out of the loop.
import netc as nc
from netc import batch

time = nc.Dim("time")
model = nc.Dim("model", 5)
vocab = nc.Dim("vocab", 5)
emb = nc.Dim("emb", 3)
utime = nc.Dim("utime")


@nc.network
def net(y: nc.Labels[batch, time, vocab]):
    tied_emb3 = nc.Embedding(emb)
    v4 = tied_emb3(y)
    v5 = v4
    v10 = v5
    v11 = nc.ConvTranspose1d(model, 4, stride=3, padding="same")(v10, axis=time, out_axis=utime)
    v12 = v11
    v13 = 0.5 * v11
    for f21 in v12:
        v27 = nc.expand(f21, utime) * v13
    return {"o1": v27}
