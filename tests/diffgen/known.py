"""Features whose programs fail on the current compiler: CI generates without them.

Each entry is feature -> the failure seen (tests/diffgen/found/ has shrunk models; "repro X" names
a program of issue 32's bug classes). When a fix lands, remove its entry: CI then generates the
construct. DOCUMENTED_REFUSALS are texts of located errors for documented limitations
(docs/language.md, Limitations): a program refused with one of them counts as correct.
"""

KNOWN_FAILING: dict[str, str] = {
    # inputs
    "input_dim_order": "RETURNN: an input whose feature dim stands before batch ([time, feat, batch], [feat, batch, "
    "time], [model, batch, time]) read in a loop: wrong numbers of a value read after it (repro "
    "min_mismatch_returnn_batch_last_value_after_loop), or 'Mismatching shape: Raw tensor (None, 6) vs "
    "[F|F'feat'(6),B]', '... must be broadcastable', rec.py _construct, 'Expected inputs.shape[-1] to be known' "
    "(found/returnn_input_feat_before_batch_loop.py)",
    # decoders
    "beam_wide": "eager and torch search: 'selected index k out of range' (repro "
    "min_crash_eager_torch_search_beam_above_vocab)",
    "search_lm": "torch: IndexError in emit_torch/emitter.py (repro search_no_inputs); RETURNN search: 'You must "
    "feed a value for placeholder tensor extern_data/placeholders/tgt/tgt_dim0_size'",
    "choice_label_unused": "compiler: StopIteration in teacher_forcing.py (repro min_crash_compiler_choice_label_unused)",
    "search_counter": "RETURNN search: a counter state stacked or returned: dyn_size, _opt_search_resolve, "
    "'... must be broadcastable' (repro min_crash_returnn_search_counter_state_returned)",
    "search_free_state": "RETURNN search: a state fed only by loop-invariant values, stacked or returned: dyn_size "
    "(repro min_crash_returnn_search_stacked_state_not_reading_choice)",
    "search_stack_free": "RETURNN search: a stacked value that does not depend on `choice`: dyn_size, "
    "_opt_search_resolve (repros min_crash_returnn_search_stacked_state_not_reading_choice, "
    "min_crash_returnn_search_rna_stacks_frame)",
    "search_stack_dyn": "torch search: KeyError of a dim max_pool/pad_frames made (repro "
    "min_crash_torch_search_stack_over_pooled_dim); compiler: a value over x's dim refused in a loop bounded by "
    "x.max_seq_len (found/compile_end_loop_stacks_bound_dim.py)",
    "search_after_if": "eager search: '`if` on a tensor needs one value per sequence, got dims [batch]' (repro "
    "min_crash_eager_search_if_on_label_after_decoder); RETURNN search: 'layer <CompareLayer ...> has beam ... but "
    "no search choices'",
    "search_after_ops": "RETURNN search: 'layer <LinearLayer ...> has beam ... but no search choices' (repro "
    "min_crash_returnn_search_two_ops_on_state_after_loop)",
    "search_enc_list": "eager training: 'the loop with `choice` stopped after N of its target's M frames' (repro "
    "min_crash_eager_train_encoder_list_read_in_choice_loop)",
    # whole sequences, loops, losses
    "conv_same_after_valid": "eager: 'Kernel size can't be greater than actual input size' (repro "
    "eager_same_conv_empty_seq)",
    "loss_expand_dyn": "RETURNN: 'Loss flattening not implemented' (repro min_crash_returnn_loss_expand_over_time)",
    "loop_nested_same_dim": "RETURNN: 'Tensor{inner_output, [T|time:whole, B, F, time]} vs Tensor{output_output, "
    "...}' (repro min_crash_returnn_nested_same_dim_inner_stack)",
    "end_invariant_body": "RETURNN: copy_with_time_dim_axis (repro "
    "min_crash_returnn_end_loop_invariant_appends_after_end)",
    "end_stack_dyn": "compiler: a value over x's dim refused in an `end` loop bounded by x.max_seq_len ('cannot "
    "stack [batch, time] over `time`', found/compile_end_loop_stacks_bound_dim.py)",
}
# (eager's empty-list error is documented: an empty list read as a tensor where no stack of the
# compiled graph has its name)

DOCUMENTED_REFUSALS: tuple[str, ...] = ("RETURNN target",)

# errors eager mode raises for its documented limitations (docs/language.md, Limitations, Eager
# mode): counted as `refused`, with the detail "documented: ..."
DOCUMENTED_EAGER_ERRORS: tuple[str, ...] = (
    "cannot tell which loop a list of",
    "cannot tell which loop this list of",
    "eager mode cannot use an empty list as a tensor",
    "is assigned only in the body of a loop that ran no step for it",
    "the hypotheses of this beam search disagree on it",
)


def documented(detail: str) -> bool:
    """A failure's detail that is a located error of a documented RETURNN-target limitation, or a
    documented eager error (the check marks those "documented: ...")."""
    if detail.startswith("documented: "):
        return True
    located = not detail.startswith("(no location)")
    return located and any(text in detail for text in DOCUMENTED_REFUSALS)
