"""Real RETURNN, building each example's emitted config for training, finds nothing left to move
out of any rec unit: netc's hoisting passes did all of it (RETURNN's `input_layers_moved_out`
and `output_layers_moved_out`, except the `rec_unstack` layers that read the inputs' frames)."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

from netc.compiler import compile_file
from netc.passes.pipeline import PassOptions
from netc_runtime.returnn_loops import Moved, moved_out

MODELS = sorted(p.name for p in EXAMPLES.glob("*.py"))


@pytest.mark.parametrize("model", MODELS)
def test_returnn_moves_nothing_out_of_an_examples_loops(model):
    text = compile_file(str(EXAMPLES / model), "returnn")
    found = moved_out(text)
    assert found or "'unit': 'nativelstm2'" in text, "every example has a loop (a rec unit, or a fused native one)"
    assert all(m == Moved([], []) for m in found.values()), found


def test_returnn_moves_work_out_of_a_loop_netc_did_not_hoist():
    """The check sees what there is to move: the attention decoder compiled without hoisting."""
    text = compile_file(str(EXAMPLES / "attention.py"), "returnn", options=PassOptions(hoist=False))
    (moved,) = moved_out(text).values()
    assert "prev_emb" in moved.inputs and "logits" in moved.outputs  # the shifted labels, the projection
