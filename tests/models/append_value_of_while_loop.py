"""A `for` loop appending a value made in an earlier `while True` loop: the list is stacked over
the `for` loop's frames, also for a sequence whose frames are as many as the `while` loop's
steps (a value made in a finished run and appended again was appended by a later loop)."""

from netc import Dim, GruCell, Tensor, batch, end, network, zeros

time = Dim("time")
hidden = Dim("hidden", 4)


@network
def net(x: Tensor[batch, time, hidden]):
    h = zeros(batch, hidden)
    n = zeros(batch)
    while True:
        h = GruCell(hidden)(h, h + 1.0)
        n = n + 1.0
        if end(n > 1.5):
            break
    out = []
    for _f in x:
        out.append(h)
    return {"o0": out}
