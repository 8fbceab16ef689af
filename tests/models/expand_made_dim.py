"""`expand` over a dim that `max_pool` makes: the pooled frames read after the expand, and a
second pooling whose frames nothing reads (its op still gives the dim its lengths)."""

from netc import Dim, Tensor, argmax, batch, cast, expand, max_pool, network, reduce_sum, where

time = Dim("time")
half = Dim("half")
third = Dim("third")
feat = Dim("feat", 4)


@network
def pooled(x: Tensor[batch, time, feat]):
    s = reduce_sum(x, axis=time)
    pool = max_pool(x, axis=time, size=2, out_axis=half)
    halves = expand(s, half) + pool  # RETURNN builds the expand's layer before the pool's
    unread = max_pool(x, axis=time, size=3, out_axis=third)  # noqa: F841 (gives `third` its lengths)
    labels = cast(expand(argmax(s, axis=feat), third), "float32")  # int32 over `third`
    signs = where(expand(s > 0.0, third), 1.0, -1.0)  # bool over `third`
    return {"output": halves, "thirds": labels + signs}
