"""Features whose programs fail on the current compiler: CI generates without them.

Each entry is feature -> the failure seen (tests/diffgen/found/ has shrunk models). When a fix
lands, remove its entry: CI then generates the construct. DOCUMENTED_REFUSALS are texts of
located errors for documented limitations (docs/language.md, Limitations): a program refused
with one of them counts as correct.
"""

KNOWN_FAILING: dict[str, str] = {
    # bug classes being fixed (see the issue); each also seen in generated programs
    "invariant_append": "a loop-invariant value appended in a loop: RETURNN copy_as_time_major / invalid perm",
    "invariant_read_after": "a loop-invariant value assigned in a loop and read after it",
    "own_axis_after": "a value over the loop's own axis read after the loop",
    "nested_stack_state": "an outer state that is the stack of an inner loop with its own state",
    "inner_state_from_outer": "an inner loop's state starting from an outer state (RETURNN dependency loop)",
    "split_in_if": "a `split` part used in a tensor `if` branch under --no-hoist",
    "expand_pool": "`expand` over a dim made by `max_pool`",
    "search_extra_loss": "search with a loss-only layer outside the loop",
    "beam_expand_state": "eager: `expand` on a state in beam search: expanded size must match",
    "unused_module_result": "eager: a Module called for nothing: no parameters known for the module",
    "unused_submodule": "eager: a Module attribute never called: no parameters known for the module",
    "index_two_dyn": "eager: `s[t]` on a tensor with 2 dynamic dims: needs exactly one dynamic dim",
    "list_of_lists": "eager: `outer.append(inner_list)` (not generated yet)",
    "labels_plus_one": "`Embedding(emb)(labels + 1)`: refused, labels + 1 has no class dim",
    "after_break": "values assigned after `if end(...): break`, read after the loop",
    "if_zip_bw_lstm": "eager: tensor if/elif/else on a state in a zip over a backward Lstm's output",
    "embedding_class_dim": "`Embedding(d)` of labels whose class dim is d: refused (already a dim of its input)",
    # found by the generator
    "read_after": "RETURNN: a value computed from the previous state, read after the loop: copy_as_time_major",
    "state_dyn_dim": "RETURNN: a state over another input's dynamic dim (accumulated attention): DotLayer reduce axis not found",
    "search_other_outputs": "search of a network with outputs besides the decoder's: RETURNN InvalidArgumentError (feed the target's size), eager: no length of a dim known",
    "frame_unused": "RETURNN: a loop over a sequence that reads none of its frames: copy_as_time_major / cannot set batch_dim_axis",
    "concat_invariant": "RETURNN: in a loop, a concat of the step's value and a value from before the loop: copy_compatible_to not allowed, axis not in source",
    "end_prev_state_value": "RETURNN: in an `end` loop, a value computed from the previous state, stacked or read after: copy_as_time_major",
    "append_after_end": "eager: appends after `if end(...): break`, every sequence ending at once: only a non-empty list ... can be used as a tensor",
    "loop_zip": "eager: a zipped sequence whose frame the body never reads: no parameters known for the module (it is dropped)",
    "choice": "RETURNN search of a decoder: You must feed a value for placeholder tgt_dim0_size (found/returnn_search_target_size.py)",
    "split_dims": "RETURNN: split_dims of a loop's stack of a state updated by a broadcast sum: get_axis_from_description not found",
    "loop_nested": "RETURNN: a loop nested in a loop: NetworkConstructionDependencyLoopException (being shrunk)",
    "read_after_end": "RETURNN: a value assigned in an `end` loop, read after it: copy_as_time_major",
    "labels_read_after": "RETURNN: labels assigned in a loop, read after it: provide an initial output value for sparse data",
    "state_dyn_dim_end": "RETURNN: a state over an input's dynamic dim in an `end` loop: axis has no dyn size / no axis to reduce",
    "dyn_read_after_end": "RETURNN: a value with an input's dynamic dim, read after an `end` loop: copy_compatible_to not allowed",
    "tuple_state": "RETURNN: LstmCell state in a loop: cannot set batch_dim_axis",
    "stacked_labels": "RETURNN: argmax labels stacked in a loop: provide an initial output value for sparse data",
}

DOCUMENTED_REFUSALS: tuple[str, ...] = ("RETURNN target",)

# errors eager mode raises for its documented limitations (docs/language.md, Limitations, Eager
# mode): counted as `refused`, with the detail "documented: ..."
DOCUMENTED_EAGER_ERRORS: tuple[str, ...] = ("cannot tell which loop a list of",)
