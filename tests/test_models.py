"""More models through the real `netc verify`: losses, loops with `end`, nested stacks, core ops."""

from __future__ import annotations

import pytest
from conftest import ROOT

MODELS = [
    "losses.py",
    "end_after_break.py",
    "end_bounded.py",
    "nested_stack.py",
    "core_ops.py",
    "whole_axis.py",
    "stack_prev_state.py",
    "expand.py",
    "reserved_names.py",
    "loop_over_made_dim.py",
    "teacher_forced_enc_state.py",
    "ops_pool.py",
    "ops_lstm_cell.py",
    "ops_gru_cell.py",
    "chained_unchanged_state.py",
    "ops_elementwise.py",
    "ops_losses.py",
    "split_linear_forms.py",
    "ctc_input_labels.py",
    "split_in_branch.py",
    "expand_made_dim.py",
    "embedding_class_dim.py",
    "slice_parts.py",
    "dead_module.py",
    "search_expand.py",
    "index_two_dynamic_dims.py",
    "nested_list_append.py",
    "while_loops_alike.py",
    "zip_backward_list.py",
    "fused_lstm_last_c.py",
    "lstm_cell_own_state_input.py",
    "append_value_of_finished_loop.py",
]
# RETURNN's loop lowering: values no step changes, the loop's own axis, nested states (also
# verified without hoisting: what stays in the loop must not change how it is lowered)
LOOP_LOWERING = [
    "invariant_results.py",
    "invariant_end_stack.py",
    "invariant_state.py",
    "own_axis_after_loop.py",
    "nested_state_from_inner_stack.py",
    "nested_outer_state_in_inner.py",
    "invariant_search_stack.py",
    "stack_prev_state_only.py",
    "end_state_other_dynamic_dim.py",
]
MODELS += LOOP_LOWERING
# also verified with the loops' bodies as written (nothing moved out by netc): a bug that shows
# only so, and how RETURNN's loops are lowered must not depend on what hoisting left in them
NO_HOIST = ["split_in_branch.py", *LOOP_LOWERING]


@pytest.mark.parametrize(("model", "flags"), [(m, ()) for m in MODELS] + [(m, ("--no-hoist",)) for m in NO_HOIST])
def test_model_verifies(netc, model, flags):
    proc = netc("verify", ROOT / "tests" / "models" / model, "--seed", "2", *flags)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "eager vs returnn" in proc.stdout and "eager vs torch" in proc.stdout


@pytest.mark.parametrize("hoist", ["--hoist", "--no-hoist"])
def test_invariant_stack_in_a_search(netc, hoist):
    """Searched, a stacked value no step changes is kept in the loop per hypothesis."""
    proc = netc("verify", ROOT / "tests" / "models" / "invariant_search_stack.py", "--seed", "2", "--search", hoist)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "summary          eager vs returnn" in proc.stdout


def test_loss_is_reported_by_every_backend(netc):
    out = netc("verify", ROOT / "tests" / "models" / "losses.py", check=True).stdout
    for backend in ("torch", "returnn"):
        assert f"l2               eager vs {backend}" in out
        assert f"last             eager vs {backend}" in out


def test_end_loop_lengths_come_from_the_end_condition(tmp_path, netc):
    """Per-sequence lengths of the new dim agree across backends and are not all the bound."""
    import numpy as np

    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 6, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", **{"in:x": x, "len:time": np.array([6, 4, 2])})
    lens = {}
    for backend in ("eager", "torch", "returnn"):
        out = tmp_path / f"{backend}.npz"
        netc(
            "run",
            ROOT / "tests" / "models" / "end_bounded.py",
            "--backend",
            backend,
            "--inputs",
            tmp_path / "in.npz",
            "-o",
            out,
            check=True,
        )
        lens[backend] = list(np.load(out)["outlen:output:out_time"])
    assert lens["eager"] == lens["torch"] == lens["returnn"]
    assert all(1 <= n <= 2 * t for n, t in zip(lens["eager"], [6, 4, 2]))
