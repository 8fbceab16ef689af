"""An RNA-style decoder (one label per encoder frame, its frame read by a one-hot `dot` over frame
positions, `end` after the last frame) that stacks the frame it reads and its position: values of
the frame counter, not of the chosen labels. RETURNN's search stacked them without the beam (a
`dyn_size` assertion)."""

from netc import (
    Dim,
    Embedding,
    GruCell,
    Labels,
    Linear,
    Tensor,
    batch,
    cast,
    choice,
    dot,
    end,
    network,
    range_over,
    reduce_max,
    zeros,
)

time = Dim("time")
align_time = Dim("align_time")
feat = Dim("feat", 4)
hid = Dim("hid", 3)
classes = Dim("classes", 5)
BEAM = 4


@network
def search_rna_stacks_frame(x: Tensor[batch, time, feat], align: Labels[batch, align_time, classes]):
    positions = range_over(time, dtype="float32")
    frames = reduce_max(positions, axis=time)
    s = zeros(batch, hid)
    pos = zeros(batch)
    out, at, labels = [], [], []
    for _ in range(x.max_seq_len):
        x_t = dot(cast(positions == pos, "float32"), x, reduce=time)  # this frame
        label = choice(Linear(classes)(s + Linear(hid)(x_t)), target=align, beam=BEAM)
        labels.append(label)
        s = GruCell(hid)(Embedding(hid)(label), s)
        out.append(x_t)  # the frame counter's value, not the choice's
        at.append(pos)
        pos = pos + 1.0
        if end(pos >= frames):
            break
    return {"labels": labels, "out": out, "at": at}
