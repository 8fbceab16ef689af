"""Real RETURNN, building each example's emitted config for training, finds nothing left to move
out of any rec unit: netc's hoisting passes did all of it (RETURNN's `input_layers_moved_out`
and `output_layers_moved_out`, except the `rec_unstack` layers that read the inputs' frames)."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES, example_network

from netc.compiler import compile_file
from netc.passes.pipeline import PassOptions
from netc_runtime.returnn_loops import moved_out

MODELS = sorted(p.name for p in EXAMPLES.glob("*.py"))
LOOP_FREE = {"conformer_ctc.py", "conformer_streaming.py"}  # whole-sequence ops only: no rec layer
# In training, RETURNN computes a self-attention over keys grown by `cum_concat` that feeds only
# outputs after the loop, as one attention over all steps (its `cum_concat` outside a loop masks
# each step's future); netc keeps `cum_concat` in the loop (tests/models/grow_decoder.py alike).
# Here RETURNN moves the second decoder layer's self-attention (the layers RETURNN names below).
CUM_CONCAT_MOVED = {"conformer_aed.py": {"keys2", "values2", "q_3", "split_dims_6", "dot_4", "mul_3", "w_3", "dot_5"}}


@pytest.mark.parametrize("model", MODELS)
def test_returnn_moves_nothing_out_of_an_examples_loops(model):
    text = compile_file(str(EXAMPLES / model), "returnn", network=example_network(EXAMPLES / model))
    found = moved_out(text)
    has_loop = bool(found) or "'unit': 'nativelstm2'" in text  # a rec unit, or a fused native one
    assert has_loop == (model not in LOOP_FREE), "every example but the loop-free ones has a loop"
    moved = {name for m in found.values() for name in m.outputs}
    assert all(m.inputs == [] for m in found.values()), found
    assert moved == CUM_CONCAT_MOVED.get(model, set()), found


def test_returnn_moves_work_out_of_a_loop_netc_did_not_hoist():
    """The check sees what there is to move: the attention decoder compiled without hoisting."""
    text = compile_file(str(EXAMPLES / "attention.py"), "returnn", options=PassOptions(hoist=False))
    (moved,) = moved_out(text).values()
    assert "prev_emb" in moved.inputs and "logits" in moved.outputs  # the shifted labels, the projection


def test_work_broadcasting_an_invariant_moves_out_of_the_loop():
    """An add of a whole sequence the loop does not step over and a step's value, read only by a
    stack, runs after the loop (the sequence expanded along the loop's axis): RETURNN moves nothing."""
    text = compile_file(str(EXAMPLES.parent / "tests" / "models" / "sink_outer_broadcast.py"), "returnn")
    (loop,) = moved_out(text).values()
    assert loop.outputs == [] and loop.inputs == [], loop
    assert "'enc_2': {'class': 'expand_dims', 'from': 'enc', 'axis': 'T', 'dim': dim_label_time}" in text
