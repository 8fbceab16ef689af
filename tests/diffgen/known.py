"""Features whose programs fail on the current compiler: CI generates without them.

Each entry is feature -> the failure seen (tests/diffgen/found/ has shrunk models). When a fix
lands, remove its entry: CI then generates the construct. DOCUMENTED_REFUSALS are texts of
located errors for documented limitations (docs/language.md, Limitations): a program refused
with one of them counts as correct.
"""

KNOWN_FAILING: dict[str, str] = {
    "expand_pool": "`expand` over a dim made by `max_pool`",
    "search_extra_loss": "search with a loss-only layer outside the loop",
    "beam_expand_state": "eager: `expand` on a state in beam search: expanded size must match",
    "list_of_lists": "eager: `outer.append(inner_list)` (not generated yet)",
    "search_other_outputs": "search of a network with outputs besides the decoder's: RETURNN InvalidArgumentError (feed the target's size), eager: no length of a dim known",
    "concat_invariant": "RETURNN: in a loop, a concat of the step's value and a value from before the loop: copy_compatible_to not allowed, axis not in source",
    "append_after_end": "eager: appends after `if end(...): break`, every sequence ending at once: only a non-empty list ... can be used as a tensor",
    "choice": "RETURNN search of a decoder: You must feed a value for placeholder tgt_dim0_size (found/returnn_search_target_size.py)",
    "expand_static": "eager: `expand` of a value over a dim an `end` loop made, in an op with another such value: no length of dim <list>_time known here (seed 14727 of the green set)",
    "own_axis_after": "RETURNN: with frame_unused, a loop whose unit output is a value over the loop's own axis: no axis to reduce (seed 14732 of the green set)",
    "frame_unused": "RETURNN: see own_axis_after (seed 14732 of the green set)",
    "tuple_state": "RETURNN: LstmCell state in a loop: cannot set batch_dim_axis",
    "made_dim_in_loop": "RETURNN: in a loop, a value over a dim max_pool/pad_frames made plus the state, stacked: RETURNN moves the combine out of the loop and cannot match the axes (found/returnn_made_dim_in_loop.py; seed 50100)",
    "conv_loop": "eager: a loop over the dim a valid Conv1d made, a sequence shorter than the filter has no frame: only a non-empty list ... can be used as a tensor (seed 15239 of the green set)",
}
# (eager's empty-list error is documented: a loop over a dim with no frames for a sequence, e.g.
# `slice_frames(y, stop=-1)` of a one-frame sequence, stacks nothing)

DOCUMENTED_REFUSALS: tuple[str, ...] = ("RETURNN target",)

# errors eager mode raises for its documented limitations (docs/language.md, Limitations, Eager
# mode): counted as `refused`, with the detail "documented: ..."
DOCUMENTED_EAGER_ERRORS: tuple[str, ...] = (
    "cannot tell which loop a list of",
    "cannot tell which loop this list of",
    "eager mode cannot use an empty list as a tensor",
)
