"""bench/bench_conformer.py's check at tiny sizes: netc's Conformer encoder (bench/conformer_model.py)
and the bench's hand-written torch module agree with rf's ConformerEncoder on RETURNN's PyTorch
backend, given the same parameters, on the encoder output (valid frames of a padded batch with
unequal lengths), the CTC loss and every gradient in training mode. No timing."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import bench_conformer  # noqa: E402


def test_bench_conformer_check_agrees_with_rf():
    with bench_conformer.rf_torch():
        model, rf_model, hand = bench_conformer.build(bench_conformer.SMALL, "cpu")
        batch = bench_conformer.batch_of(bench_conformer.SMALL, [9, 6, 2], [3, 2, 1], "cpu", 0)
        diffs = bench_conformer.check(model, rf_model, hand, batch)
    assert diffs["encoder"] <= 1e-4 and diffs["loss"] <= 1e-4 and diffs["gradient"] <= 1e-3
    assert model.training
