"""More models through the real `netc verify`: losses, loops with `end`, nested stacks, core ops."""

from __future__ import annotations

import pytest
from conftest import ROOT

MODELS = [
    "chunk_cache_attention.py",
    "chunk_cache_conv.py",
    "softmax_static_of_several.py",
    "chunked_rnn.py",
    "chunked_window_state.py",
    "chunked_pooled.py",  # a chunked loop over frames a max_pool makes (streamed in test_streaming_chunks)
    "losses.py",
    "searching_no_choice.py",
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
    "fit_frames.py",
    "compact_frames.py",
    "ops_lstm_cell.py",
    "ops_layer_norm_eps.py",
    "ops_gru_cell.py",
    "chained_unchanged_state.py",
    "ops_elementwise.py",
    "ops_losses.py",
    "split_linear_forms.py",
    "ctc_input_labels.py",
    "ctc_decoding.py",
    "split_in_branch.py",
    "expand_made_dim.py",
    "embedding_class_dim.py",
    "slice_parts.py",
    "loss_two_dynamic_dims.py",
    "dead_module.py",
    "search_expand.py",
    "index_two_dynamic_dims.py",
    "nested_list_append.py",
    "while_loops_alike.py",
    "zip_backward_list.py",
    "fused_lstm_last_c.py",
    "lstm_cell_own_state_input.py",
    "append_value_of_finished_loop.py",
    "ops_sin_logsumexp_one_hot.py",
    "ops_range_over.py",
    "ops_frames.py",
    "ops_self_attention.py",
    "ops_rel_pos_attention.py",
    "ops_chunk_mask.py",
    "ops_rnnt_loss.py",
    "rnnt_linear.py",
    "rna_decoder.py",
    "where_labels_number.py",
    "cast_class_dim.py",
    "transducer_time_sync.py",
    "training_flag.py",
    "grow_self_attention.py",
    "ops_conv.py",
    "ops_conv_causal.py",
    "ops_batch_norm.py",
    "ops_conv2d.py",
    "ops_conv2d_strided.py",
    "append_value_of_while_loop.py",
    "frames_time_major.py",
    "dead_state.py",
    "expand_over_loop_dim.py",
    "ops_bias.py",
    "bool_int_promotion.py",
    "softmax_over_empty_dim.py",
    "transformer_decoder.py",
    "made_dim_in_loop.py",
    "empty_stack_loop.py",
    "eager_list_by_name.py",
    "nested_list_read.py",
    "loss_after_expand_over_time.py",
    "later_loop_appends_last_state.py",
    "zip_outer_inner_stack.py",
    "backward_outer_inner_lists.py",
    "backward_outer_plain_list_inner.py",
    "softmax_output_over_made_dim.py",
    "softmax_over_replaced_empty_dim.py",
    "nested_loop_no_conv_frame.py",
    "held_value_first_result.py",
    "sink_outer_broadcast.py",
    "dot_own_dims_one_size.py",
    "dot_own_dim_size_one.py",
    "ops_transposed_conv.py",
    "conv_same_after_empty.py",
    "choice_reads_encoder_list.py",
    "search_const_bound.py",
    "maximum_of_scaled.py",
    "loss_expand_static_dims.py",
    "end_loop_list_of_lists.py",
    "fused_cells_no_frames.py",
    "fused_lstm_no_frames.py",
    "tied_lm.py",
]
# decoders, trained here and beam-searched in test_decoders_searched (their search on RETURNN too)
SEARCHED = [
    "search_no_inputs.py",
    "search_beam_above_vocab.py",
    "search_made_dims.py",
    "search_const_bound.py",
    "choice_reads_encoder_list.py",
    "choice_label_unread.py",
    "search_if_after_loop.py",
    "stack_over_bound_dim.py",
    "while_before_choice.py",
    "search_expand_pooled.py",
    "search_state_if_after_loop.py",
    "search_nested_stack.py",
    "search_stacks_combined.py",
    "search_target_dim_after_loop.py",
    "stack_over_bound_dim_attention.py",
    "search_reads_loop_last.py",
    "search_appends_encoder_state.py",
    "search_scores_before_label.py",
    "tied_decoder.py",
    "search_only_prob.py",
    "search_labels_only_pooled_bound.py",
    "two_choices.py",  # two choices in one step: a position, then a label (hard attention)
    "hard_attention.py",  # a choice over an encoder's frames (a dynamic dim), then the label
    "hard_attention_linear.py",  # the same with the position target computed from the lengths
    "label_arith_state.py",  # arithmetic on labels (plain ints) as a state
    "target_frame_in_loop.py",  # the step's target frame read in training (`align[i]`), a chosen position as a state
    "two_choices_window_over_state.py",  # a first-choice state feeding the energies a window after it reads
    "two_choices_label_from_old_state.py",  # the label scored before the position chosen first
    "two_choices_position_from_old_state.py",  # the position scored before the label chosen first
    "two_choices_state_batch_axis.py",  # a state over the frames from the position only, time-major encoder
    "two_choices_through_attention.py",  # the label reads the position through attention only
    "two_choices_label_unread.py",  # the next position reads nothing of the label
    "two_choices_position_only_in_state.py",  # a position read only by a state its own scores read
    "two_choices_state_broadcast.py",  # a rebeamed state from zeros with a dim its update lacks
    "search_scores_from_prev_state.py",  # one choice scored from attention on the previous state only
    "state_shift_decoder.py",  # states taking each other's previous values (`e2 = e1_prev`)
]
MODELS += [m for m in SEARCHED if m not in MODELS]
# RETURNN's loop lowering: values no step changes, the loop's own axis, nested states, inputs with
# batch anywhere (also verified without hoisting: what stays in the loop must not change how it is lowered)
LOOP_LOWERING = [
    "invariant_results.py",
    "invariant_end_stack.py",
    "invariant_state.py",
    "own_axis_after_loop.py",
    "nested_state_from_inner_stack.py",
    "nested_outer_state_in_inner.py",
    "invariant_search_stack.py",
    "last_label_of_frames.py",
    "invariant_concat.py",
    "expand_moved_out.py",
    "state_reduced_in_decoder.py",
    "stack_prev_state_only.py",
    "end_state_other_dynamic_dim.py",
    "state_dim_only_from_prev.py",
    "state_prev_template_cycle.py",
    "output_state_other_dynamic_dim.py",
    "nested_reads_outer_frame.py",
    "nested_reads_split_part.py",
    "batch_position_loops.py",
    "batch_position_nested.py",
    "end_invariant_appends_after.py",
    "end_loop_after_nested_values.py",
    "loss_expand_batch_only.py",
    "nested_inner_loop_kept.py",
    "nested_inner_loop_kept_forms.py",
    "nested_end_bound_in_step.py",
    "nested_zeros_state_unbatched_step.py",
    "nested_end_loop_invariant.py",
    "nested_reads_whole_made_dim.py",
    "nested_end_from_outer_state.py",
]
# values assigned around `if end(...): break` read after the loop, in a batch where a sequence
# ends at its first step (verify's lengths 7, 6, 2: the bound, a later step, the first step)
AFTER_BREAK = [
    "end_held_after_break.py",
    "end_held_appends_after.py",
    "end_assigned_both_sides.py",
    "end_appends_after_state_read.py",
]
# (in training, the target's last frame is the ending step)
MODELS += LOOP_LOWERING + AFTER_BREAK + ["choice_after_break.py"]
# searched decoders' values that do not depend on the labels, and values after the loop (their
# searches: tests/test_search_values.py)
MODELS += [
    "search_state_ignores_label.py",
    "search_counter_returned.py",
    "search_rna_stacks_frame.py",
    "search_state_after_loop.py",
]
# also verified with the loops' bodies as written (nothing moved out by netc): a bug that shows
# only so, and how RETURNN's loops are lowered must not depend on what hoisting left in them
# a state grown by `cum_concat`: training and beam search (what hoisting leaves in the loop
# must not change how it is grown)
GROW = ["grow_self_attention.py", "grow_decoder.py", "grow_attention_feeds_state.py"]
MODELS += ["grow_decoder.py", "grow_attention_feeds_state.py"]
NO_HOIST = [
    "split_in_branch.py",
    "ops_sin_logsumexp_one_hot.py",
    *LOOP_LOWERING,
    *AFTER_BREAK,
    "choice_after_break.py",
    *GROW,
    "nested_end_zero_state.py",
    "state_shift_decoder.py",  # the loop's states take their next values at once
    # a chunked loop: what hoisting leaves in it must not change how its chunks are lowered
    "chunked_rnn.py",
    "chunked_window_state.py",
    "chunk_cache_attention.py",
    "chunk_cache_conv.py",
]


@pytest.mark.parametrize(("model", "flags"), [(m, ()) for m in MODELS] + [(m, ("--no-hoist",)) for m in NO_HOIST])
def test_model_verifies(verify, model, flags):
    proc = verify(ROOT / "tests" / "models" / model, "--seed", "2", *flags)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "eager vs returnn" in proc.stdout and "eager vs torch" in proc.stdout


@pytest.mark.parametrize(
    ("flags", "lengths"),
    [(("--max-len", "8"), "[8, 6, 3, 3, 2, 1]"), (("--max-len", "9"), "[9, 7, 4, 3, 3, 1]")],
)
def test_conv2d_strided_lengths(verify, flags, lengths):
    """Strided and "valid" `Conv2d`: sequences shorter than the filters, odd and even lengths,
    lengths not congruent to the longest's modulo the time strides (each its own "same" padding)."""
    proc = verify(ROOT / "tests" / "models" / "ops_conv2d_strided.py", "--seed", "2", "--batch", "6", *flags)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"lengths time={lengths}" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")


@pytest.mark.parametrize("hoist", ["--hoist", "--no-hoist"])
def test_grown_state_searched(verify, hoist):
    """A decoder's self-attention over the labels so far: the grown keys and values follow the beam."""
    proc = verify(ROOT / "tests" / "models" / "grow_decoder.py", "--seed", "2", "--search", hoist)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "labels           eager vs returnn" in proc.stdout and "scores           eager vs torch" in proc.stdout


@pytest.mark.parametrize("hoist", ["--hoist", "--no-hoist"])
def test_invariant_stack_in_a_search(verify, hoist):
    """Searched, a stacked value no step changes is kept in the loop per hypothesis."""
    proc = verify(ROOT / "tests" / "models" / "invariant_search_stack.py", "--seed", "2", "--search", hoist)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "summary          eager vs returnn" in proc.stdout


@pytest.mark.parametrize("hoist", ["--hoist", "--no-hoist"])
def test_decoder_searched(verify, hoist):
    """Searched decoders whose RETURNN lowering failed: a state reduced over its own dim, a target
    named before the inputs."""
    proc = verify(ROOT / "tests" / "models" / "state_reduced_in_decoder.py", "--seed", "2", "--search", hoist)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "labels           eager vs returnn" in proc.stdout


def test_search_ends_on_the_label_before_the_choice(verify):
    """`end` on the label before the step's choice is of the hypotheses before it: each current
    hypothesis ends by the row it continues (`--seed 8` draws a batch where eagerly taking the
    rows as they are ended the wrong hypotheses: other lengths, other labels)."""
    proc = verify(ROOT / "tests" / "models" / "search_scores_before_label.py", "--seed", "8", "--search")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "labels           eager vs returnn" in proc.stdout


@pytest.mark.parametrize("model", SEARCHED)
def test_decoders_searched(verify, model):
    """Searches every target agrees on: an unconditional LM (no input: the target's batch size),
    a beam above the class dim, results over dims ops made (their lengths returned), a constant
    bound, a decoder reading the encoder's list, a `choice` whose label nothing reads (it still
    searches), an `if` on the last label after the searched loop (eagerly the best hypothesis'
    branch), a returned list of the encoder's final state appended at each step, scores made
    before the step reads the last label, two choices in one step (the second extending the
    hypotheses the first made)."""
    proc = verify(ROOT / "tests" / "models" / model, "--seed", "2", "--search")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "scores           eager vs returnn" in proc.stdout and "scores           eager vs torch" in proc.stdout


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


@pytest.mark.parametrize(("model", "stacked"), [("end_held_after_break.py", 1), ("end_held_appends_after.py", 0)])
def test_values_after_the_break_of_a_first_step_end(tmp_path, netc, model, stacked):
    """A sequence of length 2 ends at its first step (stacking `stacked` frames): every backend gives
    the value `y` had before the loop, as the one of length 4 gets its value from the step before
    the ending one."""
    import numpy as np

    x = np.random.default_rng(3).standard_normal((2, 4, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", **{"in:x": x, "len:time": np.array([4, 2])})
    outs = {}
    for backend in ("eager", "torch", "returnn"):
        out = tmp_path / f"{backend}.npz"
        netc(
            "run",
            ROOT / "tests" / "models" / model,
            "--backend",
            backend,
            "--inputs",
            tmp_path / "in.npz",
            "-o",
            out,
            check=True,
        )
        outs[backend] = dict(np.load(out))
    for backend in ("eager", "torch", "returnn"):
        assert list(outs[backend]["outlen:output:out_time"]) == [stacked + 2, stacked]
        np.testing.assert_allclose(outs[backend]["out:y"], outs["eager"]["out:y"], atol=1e-5)
    y = outs["eager"]["out:y"]
    assert not np.allclose(y[1], 0.0)  # the value before the loop, not zeros
    assert not np.allclose(y[0], y[1])


def test_search_dots_with_values_from_before_the_loop(verify):
    """A step's dots with the encoder states: grouped per sequence where the search can (their
    copies per hypothesis left out), masked per hypothesis where it cannot; a dot over two dims.
    (The `--loops scan` search of every model with `choice` is test_scan's.)"""
    proc = verify(ROOT / "tests" / "models" / "search_dots.py", "--seed", "2", "--search")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "logits           eager vs returnn" in proc.stdout and "scores           eager vs torch" in proc.stdout


def test_conv2d_one_column(verify):
    """A feature stride with one window over the features: every target convolves at feature
    stride 1 (the same window; oneDNN's convolutions compute the strided one wrong, docs/targets.md),
    RETURNN through a `slice` of that window's column ("valid": the first; "same": its own)."""
    proc = verify(ROOT / "tests" / "models" / "conv2d_one_column.py", "--seed", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok") and "d                eager vs returnn" in proc.stdout
