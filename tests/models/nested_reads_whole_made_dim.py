"""Without hoisting, a loop nested in another reads a whole value over the dim both loops run
over, a dim `slice_frames` made (diffgen seed 900184): the whole value enters each loop under a
tag of its own (`reinterpret_data`), given as pairs of dims, not as a dict keyed by dims (TF
flattens a layer's options, and such a dict's keys hash anew once RETURNN has merged the made dim
with its lengths' dim: "Dictionary was modified during iteration over it")."""

from netc import (
    Dim,
    GruCell,
    Linear,
    Tensor,
    argmax,
    batch,
    network,
    reduce_mean,
    slice_frames,
    stack,
    tanh,
    where,
    zeros,
)

time = Dim("time")
frames = Dim("frames")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def net(x: Tensor[time, batch, feat]):
    v = slice_frames(x, axis=time, stop=3, out_axis=frames)
    w = tanh(Linear(hidden)(v))
    h = zeros(batch, hidden)
    outs = []
    for f in reversed(w):
        h = GruCell(hidden)(f, h)
        s = zeros(batch, hidden)
        inner = []
        for g in v:
            s = tanh(Linear(hidden)(g) + s)
            inner.append(where(argmax(h, axis=hidden) > 0, tanh(Linear(hidden)(reduce_mean(w, axis=frames))), s))
        outs.append(reduce_mean(inner, axis=frames))
    return {"o": stack(outs)}
