"""Every construct the generator can write has a feature name; a program lists those it used.

`KNOWN_FAILING` (known.py) names the features whose programs fail on the current compiler; CI
generates with the others (`GREEN`).
"""

from __future__ import annotations

from .known import KNOWN_FAILING

FEATURES = frozenset(
    {
        # inputs
        "second_input",  # a second float input over another dynamic dim
        "shared_dim_input",  # a second float input over the first one's dim
        "labels_input",  # a Labels input over the first dim (cross entropy, Embedding)
        "batch_not_first",  # `Tensor[time, batch, feat]`
        # whole-sequence ops
        "linear_nobias",
        "unary",
        "binary",
        "where",
        "concat",
        "split",
        "split_dims",
        "split_axis",  # `split(x, parts, axis=d)` of one of two static dims (after a split_dims)
        "merge_dims",
        "reduce_static",
        "reduce_dyn",
        "softmax",
        "attention",  # softmax + dot over a dynamic dim
        "layer_norm",
        "bias",  # Bias(dim)(x): a learned parameter added over a static dim
        "embedding",
        "tied",  # `Linear(vocab, weight=emb.weight)`: an output layer with the embedding's weight (also in a decoder)
        "argmax",
        "expand_static",
        "expand_dyn",
        "max_pool",
        "conv",  # Conv1d (same/valid, stride, dilation, depthwise), silu, BatchNorm after it, Conv2d
        "batch_norm_moved",  # BatchNorm(update_in_inference=True): the whole batch's statistics (torch the reference)
        "conv2d_strided",  # Conv2d with a time stride ("same": each sequence's own padding) or "valid", onto `c2time`
        "conv_causal",  # Conv1d with padding 'causal' (left only)
        "conv_loop",  # a loop over the dim a valid Conv1d made (sequences shorter than its filter: no frame)
        "transposed_conv",  # ConvTranspose1d (same/valid, filter shorter or longer than its stride) onto `utime`
        "dropout",
        "stop_gradient",
        "lstm_fw",
        "lstm_bw",
        "helper",
        "helper_default",
        "module",
        "module_method",
        "module_shared",  # one instance called from several places
        "nested_module",
        "tensor_if",
        "elif",
        "stack_op",  # stack(out) * 2.0
        "training_flag",  # `nc.training()` in `where` or as an `if` condition
        # loops
        "loop_iter",
        "loop_range_index",
        "loop_unstack",
        "loop_zip",
        "loop_reversed",
        "loop_nested",
        "loop_end_range",
        "loop_end_maxlen",
        "loop_while",
        "multi_state",
        "tuple_state",  # LstmCell's (h, c)
        "state_shift",  # a state whose next value is another state's previous one (`e2 = e1_prev`), also in a decoder
        "gru_cell",
        "state_from_value",  # a state whose initial value is not zeros
        "state_dyn_dim",  # accumulated attention weights [batch, enc]
        "cum_concat",  # a state grown by a frame per step (`empty` + `cum_concat`), attended over
        "append",
        "stacked_labels",
        "read_after",  # a value assigned in the body, read after the loop
        "attention_in_loop",
        "chunked_loop",  # `for c in nc.chunks(x, chunk)`: chunks of a sequence, a state, attention over the chunk
        "chunked_window",  # in a chunked loop, a state over a static window dim the chunk attends over
        "chunk_cache",  # in a chunked loop, a cache of the last frames joined to the chunk (`join_chunk`, `slice_static`, `to_chunk`): attention over it, a causal Conv1d over it
        "static_range",  # `for k in range(n)` in a chunked loop's body: unrolled
        # losses, decoders
        "loss",
        "ce_loss",
        "label_smoothing",
        "ctc",
        "rnnt",  # rnnt_loss over a joint network of a sequence and labels with a begin label
        "ctc_decode",  # ctc_greedy and ctc_prefix_search (some beam, maybe a bigram LM table) of a sequence's logits
        "ctc_decode_lm",  # ctc_prefix_search with an LM function (a Module or a helper function, its state)
        "ctc_decode_flashlight",  # ctc_prefix_search(method="flashlight"), its pruning options drawn
        "choice",
        "transducer_search",  # greedy / modified / time-synchronous / graves search of a prediction and a joint network
        # constructs of known bug classes (see known.py)
        "invariant_append",
        "invariant_read_after",
        "own_axis_after",
        "nested_stack_state",
        "inner_state_from_outer",
        "split_in_if",
        "expand_pool",
        "search_extra_loss",
        "beam_expand_state",
        "unused_module_result",
        "index_two_dyn",
        "list_of_lists",
        "after_break",
        "if_zip_bw_lstm",
        "embedding_class_dim",
        "unused_submodule",
        "dyn_read_after_end",  # found: a value with a dynamic dim read after an `end` loop
        "state_dyn_dim_end",  # found: a state with a dynamic dim in an `end` loop
        "read_after_end",  # found: a value assigned in an `end` loop, read after it
        "labels_read_after",  # found: labels (argmax) assigned in a loop, read after it
        "concat_invariant",  # found: in a loop, a concat of a step's value and a loop-invariant one
        "end_prev_state_value",  # found: in an `end` loop, a value computed from the previous state
        "append_after_end",  # found: appends after `if end(...): break` (the ending step dropped)
        "frame_unused",  # found: a loop over a sequence whose body reads none of its frames
        "search_other_outputs",  # found: a searched network with outputs besides the decoder's
        # transformer/conformer ops (shapes.py)
        "sin_cos",
        "logsumexp",
        "cumsum",  # a running sum of an op's result over one of its dims (its own random stream)
        "one_hot",
        "range_over",
        "mask_inf",  # -inf at a position or below a threshold, then exp (its own random stream)
        "int_div",  # a float of labels' `//` and `%` parts (floor semantics) added (its own random stream)
        "slice_frames",
        "pad_frames",
        "fit_frames",  # padded onto a new dim and read back over the first (each sequence's first frames)
        "compact_frames",  # the frames where a mask computed from them holds, onto a new dim (maybe empty)
        "fit_frames_up",  # a ConvTranspose1d's output read over the input's frames (the hybrids' upsampling)
        "shift_right",
        "self_attention",
        "rel_pos",  # relative positions' scores in the self-attention
        "chunk_mask",  # limited-context self-attention: `where(chunk_mask(...), scores, -1e30)` (N, K or None)
        "made_dim_in_loop",  # found: in a loop, a value over a dim an op made (stacked with a state)
        # inputs as users annotate them, the loops reading them
        "input_dim_order",  # any order of an input's annotation (`Tensor[time, feat, batch]`, `Labels[dec, batch, v]`)
        # a searched decoder (`choice`) as users write it (decoder.py)
        "dec_len_free",  # targets of their own lengths within the loop's bound (longer than the encoder too)
        "search_const_bound",  # `for _ in range(n)` bounds the decoder (targets within n frames)
        "search_lm",  # a network whose only input is its target: an unconditional LM
        "rna_decoder",  # one label per encoder frame (a one-hot `dot` over positions), `end(pos >= frames)`
        "beam_wide",  # a class dim of 2 or 3 searched with a wider beam
        "search_ops",  # any op in the decoder's step (whole-sequence values, modules, `if`s, ...)
        "search_counter",  # a counter state that ignores the label (in the `end`, stacked, returned)
        "search_free_state",  # a state fed only by loop-invariant values (not the label)
        "search_stack_free",  # stacks of values that do not depend on `choice` (states, frames, invariants)
        "search_stack_dyn",  # stacks over dynamic dims: attention weights over the encoder or a made dim
        "search_split_dims",  # `split_dims` in the step, its two static dims stacked
        "search_split_axis",  # with search_split_dims: a `split(..., axis=)` of one of the two, a part stacked
        "search_enc_list",  # a list an earlier loop stacked, read in the decoder's step
        "search_made_enc",  # attention over a dim `max_pool`, a strided conv or a slice made
        "choice_input_type",  # `choice(..., input_type="log_prob"/"prob")` over log_softmax/softmax scores
        "search_only",  # `if nc.searching():` an LM state and its scores added (shallow fusion); `where(searching())`
        "choice_label_unused",  # a `choice` whose label nothing reads (an `end` on a counter)
        "two_choices",  # a position `choice` (its own target over the decoder's dim) before the label's
        "choice_enc_position",  # with two_choices: the position a `choice` over the encoder's frames (dynamic)
        "choice_computed_target",  # with two_choices: the position's target computed from the lengths (no input)
        "label_arith",  # an int state of the chosen labels (or positions): the largest so far, stacked plus one
        "choice_no_length_norm",  # with two_choices: the position's `choice` without length_normalization
        "choice_target_frame",  # the step's target frame `tgt[i]` read in training (`if nc.searching():`)
        "search_bound_floordiv",  # the decoder's bound `x.max_seq_len * 3 // 2` (targets as long as the encoder)
        "search_read_after",  # its state, counter, last label and last values read after the searched loop
        "search_after_if",  # after the searched loop: a tensor `if` on its label or a value of it
        "search_after_ops",  # after the searched loop: ops on its state, label and last values, returned
        # whole-sequence and loop constructs users write
        "conv_same_after_valid",  # a "same" Conv1d over the dim a strided "valid" one made
        "loss_expand_dyn",  # a loss made by `expand` over a dynamic dim
        "loop_nested_same_dim",  # a loop nested in one over the same dim, stacking whole-sequence values
        "end_stack_dyn",  # an `end` loop stacking values over dynamic dims (attention weights, a sequence)
        "maximum_scaled",  # `nc.maximum(v * c, v)`
        "frame_read_after",  # a loop's frame (or an op of it) read after the loop: each sequence's last
        "nested_in_end",  # a loop nested in an `end` loop
        "nested_inner_end",  # an `end` loop nested in a loop, its state from the outer step's values
        "nested_reversed",  # a backward loop nested in a loop
        "nested_mix",  # an inner loop stacking where(outer state's argmax, its frame, its state)
        "end_invariant_body",  # an `end` loop whose body is loop-invariant, appending after the `end`
    }
)
GREEN = FEATURES - set(KNOWN_FAILING)
