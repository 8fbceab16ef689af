# diffgen seed 289 (every feature, generator of 3ed07cf; input_dim_order), shrunk: the class of
# min_mismatch_returnn_batch_last_value_after_loop (an input whose feature dim stands before batch, read
# in a loop), with other faces than wrong numbers of a value read after the loop:
#   netc verify returnn_input_feat_before_batch_loop.py
#   verify: returnn failed: AssertionError at returnn/tf/layers/rec.py:2252 (_construct)
# [batch, enc, model] verifies. Others of the class in the same run (the input's annotation in brackets):
#   seed 253 [model, batch, time], a state over its frames (`e[ti]`) stacked by a searched loop: the same
#     assertion (--search);
#   seed 16 [feat, time, batch], a loop `zip(x, x)` (frames unread) nesting another: "Mismatching shape: Raw tensor (None, 6) vs Tensor{'x', [F|F'feat'(6),B], ctx=loop('time'[B])}";
#   seed 31 [time, feat, batch], the repro's own shape (`for f in x: v = f`, v returned) on diffgen's batch:
#     "condition [N,N], then [N,N], and else [N,N] must be broadcastable" instead of wrong numbers;
#   seed 95 [feat, time, batch], `LstmCell` on a frame (--no-hoist): "Expected inputs.shape[-1] to be known, saw shape: (4, None)".
# Fixed on main by reading such inputs in netc's order (tests/models/batch_position_loops.py).
import netc as nc
from netc import batch

enc = nc.Dim("enc")
model = nc.Dim("model", 5)


@nc.network
def net(e: nc.Tensor[model, batch, enc]):
    for f17 in e:
        v29 = nc.expand(f17, enc) * e
    return {"o1": v29}
