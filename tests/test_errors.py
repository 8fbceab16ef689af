"""User mistakes: `file:line:col: error: ...`, the source line, a caret, exit code 1, no traceback.

Each case is a model file written to disk and compiled by the real CLI.
"""

from __future__ import annotations

import textwrap

import pytest

HEADER = """\
from netc import Dim, Linear, Tensor, batch, network, tanh, zeros, split, concat, reduce_sum, softmax, unstack, end, expand
time = Dim("time")
feat = Dim("feat", 8)
hidden = Dim("hidden", 6)
"""

# (name, body of the model after HEADER, expected message part, expected line of the body (1-based), col or None)
CASES = [
    (
        "unknown_name",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return Linear(hidden)(y)
        """,
        "unknown name `y`",
        3,
        26,
    ),
    (
        "try_statement",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            try:
                y = x
            except Exception:
                y = x
            return y
        """,
        "`try` is not supported",
        3,
        4,
    ),
    (
        "state_without_initial_value",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for x_t in x:
                h = tanh(Linear(hidden)(x_t) + h)
                out.append(h)
            return out
        """,
        "`h` is read before it is assigned in the loop body",
        5,
        39,
    ),
    (
        "state_changes_dims",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            for x_t in x:
                h = x_t
            return h
        """,
        "loop state `h` changes in the loop: [batch, hidden] before, [batch, feat] after",
        5,
        8,
    ),
    (
        # the body reads the state as labels (as before the loop); from the second step on it is
        # `lab + 1`, which has no class dim (eager mode once failed there, the targets did not)
        "state_changes_class_dim",
        """
        from netc import Embedding, Labels, argmax
        vocab = Dim("vocab", 5)
        @network
        def f(y: Labels[batch, time, vocab]):
            lab = argmax(zeros(batch, vocab), axis=vocab)
            out = []
            for y_t in y:
                out.append(Embedding(hidden)(lab))
                lab = lab + 1
            return out
        """,
        "loop state `lab` changes in the loop: labels over `vocab` before, int32 without a class dim after",
        9,
        8,
    ),
    (
        # `cast(..., class_dim=)` makes labels: int32 over a static dim that is not one of theirs
        "cast_class_dim_not_int",
        """
        from netc import Labels, cast
        vocab = Dim("vocab", 5)
        @network
        def f(y: Labels[batch, time, vocab]):
            return cast(y, "float32", class_dim=hidden)
        """,
        "`cast` with a class dim makes int32 labels, not float32",
        5,
        None,
    ),
    (
        "cast_class_dim_of_the_labels",
        """
        from netc import Labels, cast
        vocab = Dim("vocab", 5)
        @network
        def f(y: Labels[batch, feat, vocab]):
            return cast(y, "int32", class_dim=feat)
        """,
        "the class dim `feat` cannot also be a dim of the labels",
        5,
        None,
    ),
    (
        "linear_needs_a_dim",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return Linear(5)(x)
        """,
        "Linear(out_dim) needs a static dim",
        3,
        11,
    ),
    (
        "unknown_netc_import",
        """
        from netc import Conv9
        """,
        "`netc` has no `Conv9`",
        1,
        17,
    ),
    (
        "loop_over_static_tensor",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for v in zeros(batch, hidden):
                out.append(v)
            return out
        """,
        "cannot loop over a tensor with no dynamic dim",
        4,
        13,
    ),
    (
        "while_loop",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            while True:
                pass
            return x
        """,
        "`while` loops are `while True:` with `if end(cond): break` in the body",
        3,
        4,
    ),
    (
        "reduce_over_missing_dim",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return reduce_sum(x, axis=hidden)
        """,
        "cannot reduce over `hidden`",
        3,
        11,
    ),
    (
        "split_not_divisible",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            a, b, c = split(x, 3)
            return a
        """,
        "cannot split `feat` of size 8 into 3 equal parts",
        3,
        14,
    ),
    (
        "concat_mismatch",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            return concat(x, h)
        """,
        "concat inputs must agree on all dims but the feature dim: [batch, time] vs [batch]",
        4,
        11,
    ),
    (
        "foreign_call",
        """
        import numpy as np
        @network
        def f(x: Tensor[batch, time, feat]):
            return np.tanh(x)
        """,
        "`numpy.tanh` is not part of the netc language",
        4,
        11,
    ),
    (
        "unpack_mismatch",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            a, b = split(x, 4)
            return a
        """,
        "cannot unpack 4 into 2 names",
        3,
        4,
    ),
    (
        "missing_annotation",
        """
        @network
        def f(x):
            return x
        """,
        "network input `x` needs an annotation",
        2,
        6,
    ),
    (
        "syntax_error",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return x +
        """,
        "syntax error",
        3,
        None,
    ),
    (
        "break_without_end",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for x_t in x:
                out.append(x_t)
                break
            return out
        """,
        "`break`/`continue` are only supported as `if end(cond): break`",
        6,
        8,
    ),
    (
        "no_return",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            y = x
        """,
        "the network function must end with `return`",
        2,
        0,
    ),
    (
        "range_of_a_number",  # unrolled (a static range): `t` is a Python int, no loop index
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for t in range(5):
                out.append(x[t])
            return out
        """,
        "tensors can only be indexed by a loop index",
        5,
        19,
    ),
    (
        "python_value_as_state",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            i = 0
            out = []
            for x_t in x:
                i = i + 1
                out.append(x_t * i)
            return out
        """,
        "`i` holds a Python value before the loop and is reassigned",
        6,
        8,
    ),
    (
        "append_twice",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for x_t in x:
                out.append(x_t)
                out.append(x_t)
            return out
        """,
        "a list is appended to twice in one step",
        6,
        8,
    ),
    (
        "shared_module_other_shape",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            lin = Linear(hidden)
            a = lin(x)
            return lin(a)
        """,
        "module `lin` called on inputs of another shape",
        5,
        11,
    ),
    (
        "softmax_over_batch",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return softmax(x, axis=batch)
        """,
        "softmax over the batch dim is not allowed",
        3,
        11,
    ),
    (
        "index_with_int",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return x[0]
        """,
        "tensors can only be indexed by a loop index",
        3,
        11,
    ),
    (
        "fit_frames_onto_a_dim_without_lengths",
        """
        from netc import fit_frames
        other = Dim("other")

        @network
        def f(x: Tensor[batch, time, feat]):
            return fit_frames(x, axis=time, out_axis=other)
        """,
        "`fit_frames` over dynamic dim `other`, whose lengths are not known here",
        6,
        11,
    ),
    (
        "fit_frames_of_a_static_dim",
        """
        from netc import fit_frames

        @network
        def f(x: Tensor[batch, time, feat]):
            return fit_frames(x, axis=feat, out_axis=time)
        """,
        "`fit_frames` needs `axis` to be a dynamic dim of [batch, time, feat]",
        5,
        11,
    ),
    (
        "compact_frames_mask_over_other_dims",
        """
        from netc import compact_frames
        kept = Dim("kept")

        @network
        def f(x: Tensor[batch, time, feat]):
            return compact_frames(x, x > 0.0, axis=time, out_axis=kept)
        """,
        "`compact_frames` needs a bool `mask` [batch, time], got bool [batch, time, feat]",
        6,
        11,
    ),
    (
        "compact_frames_onto_an_input_dim",
        """
        from netc import compact_frames
        other = Dim("other")

        @network
        def f(x: Tensor[batch, time, feat], y: Tensor[batch, other, feat]):
            return compact_frames(x, reduce_sum(x, axis=feat) > 0.0, axis=time, out_axis=other)
        """,
        "`other` already has lengths",
        6,
        11,
    ),
    (
        "slice_of_a_tensor",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = Linear(hidden)(x)
            return h[:-1]
        """,
        "a tensor cannot be sliced with `[...]` (it is indexed only by a loop index, `x[t]` in `for t in "
        "range(x.max_seq_len)`): the result's dynamic dim needs a name; write "
        "`slice_frames(x, axis=time, stop=-1, out_axis=new_dim)` with `new_dim = Dim(...)`",
        4,
        11,
    ),
    (
        "two_indices_of_a_tensor",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return x[0, 1]
        """,
        "a tensor takes one index: netc indexes tensors by a loop index",
        3,
        11,
    ),
    (
        "slice_by_a_float",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return split(x, 2)[0.5:]
        """,
        "a list or tuple is sliced by integers (`parts[1:]`), with a step other than 0",
        3,
        11,
    ),
    (
        "dim_indexed",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return feat[1]
        """,
        "dim `feat` cannot be indexed by `1`: netc indexes tensors by a loop index",
        3,
        11,
    ),
    (
        "dim_redeclared",
        """
        hidden2 = Dim("hidden", 7)
        """,
        "dim `hidden` declared again with another size (6 vs 7)",
        1,
        10,
    ),
    (
        "unstack_non_dynamic",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for v in unstack(x, axis=feat):
                out.append(v)
            return out
        """,
        "`feat` is not a dynamic dim",
        4,
        13,
    ),
    (
        "bad_op_arguments",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return reduce_sum(x)
        """,
        "bad arguments to `reduce_sum`",
        3,
        11,
    ),
    (
        "bool_minus_number",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return 1.0 - (x > 0.0)
        """,
        "`-` of a bool tensor (as in torch): `cast` it to int32 or float32 first",
        3,
        11,
    ),
]

LOOP_CASES = [
    (  # a position over a dynamic dim has no fixed vocabulary: no embedding table can hold it
        "embedding_of_position",
        """
        from netc import Embedding, Labels, choice, full, dot, one_hot
        vocab = Dim("vocab", 5)
        dec = Dim("dec")
        @network
        def f(x: Tensor[batch, time, feat], align: Labels[batch, dec, time], y: Labels[batch, dec, vocab]):
            s = zeros(batch, hidden)
            out = []
            for _ in range(x.max_seq_len):
                where = choice(dot(x, Linear(feat)(s), reduce=feat), target=align, beam=2)
                s = tanh(Embedding(hidden)(where))
                label = choice(Linear(vocab)(s), target=y, beam=2)
                out.append(label)
                if end(label == 0):
                    break
            return out
        """,
        "`Embedding` needs labels over a static class dim (a vocabulary)",
        10,
        17,
    ),
    (
        "end_outside_loop",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            if end(reduce_sum(x, axis=feat) > 0.0):
                return x
            return x
        """,
        "`end(cond)` is only valid as `if end(cond): break` in a loop",
        3,
        7,
    ),
    (
        "end_called_as_value",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            e = end(reduce_sum(x, axis=feat) > 0.0)
            return x
        """,
        "`end(cond)` is only valid as `if end(cond): break` in a loop",
        3,
        8,
    ),
    (
        "end_in_loop_over_frames",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for x_t in x:
                out.append(x_t)
                if end(reduce_sum(x_t, axis=feat) > 0.0):
                    break
            return out
        """,
        "`if end(cond): break` needs `for t in range(n)` or `while True`",
        6,
        8,
    ),
    (
        "end_condition_per_frame",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            out = []
            while True:
                h = tanh(Linear(hidden)(h))
                out.append(h)
                if end(h > 0.0):
                    break
            return out
        """,
        "end(cond) needs one bool per sequence (dims within [batch]), got bool[batch, hidden]",
        8,
        11,
    ),
    (
        "while_not_true",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            while reduce_sum(h, axis=hidden) < 1.0:
                h = h + 1.0
            return h
        """,
        "`while` loops are `while True:` with `if end(cond): break` in the body",
        4,
        4,
    ),
    (
        "appends_on_both_sides_of_end",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            a = []
            b = []
            for t in range(x.max_seq_len):
                h = tanh(Linear(hidden)(h))
                a.append(h)
                if end(reduce_sum(h, axis=hidden) > 0.0):
                    break
                b.append(h)
            return {"output": a, "b": b}
        """,
        "appends before and after `if end(...): break` would give stacks of different lengths",
        11,
        8,
    ),
    (
        "state_assigned_after_end",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            out = []
            while True:
                out.append(h)
                if end(reduce_sum(h, axis=hidden) > 0.0):
                    break
                h = tanh(Linear(hidden)(h))
            return out
        """,
        "loop state `h` is assigned after `if end(...): break`",
        9,
        8,
    ),
    (
        "reversed_of_a_number",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for v in reversed(zeros(batch, hidden)):
                out.append(v)
            return out
        """,
        "cannot loop over a tensor with no dynamic dim",
        4,
        13,
    ),
    (
        "reversed_range",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for t in reversed(range(x.max_seq_len)):
                out.append(x[t])
            return out
        """,
        "`reversed(range(...))` would index frames by hand; loop over `reversed(x)` instead",
        4,
        13,
    ),
    (
        "zip_mixed_directions",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for a, b in zip(x, reversed(x)):
                out.append(a + b)
            return out
        """,
        "zip of reversed and forward sequences",
        4,
        16,
    ),
    (
        "one_branch_variable",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            s = reduce_sum(reduce_sum(x, axis=feat), axis=time)
            if s > 0.0:
                y = s * 2.0
            return y
        """,
        "`y` is assigned in only one branch of the `if` on a tensor at line 8",
        6,
        11,
    ),
    (
        "if_on_frames",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            if reduce_sum(x, axis=feat) > 0.0:
                x = x * 2.0
            return x
        """,
        "`if` on a tensor needs one bool per sequence (dims within [batch]), got bool[batch, time]",
        3,
        7,
    ),
    (
        "append_in_tensor_if",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for x_t in x:
                if reduce_sum(x_t, axis=feat) > 0.0:
                    out.append(x_t)
            return out
        """,
        "append inside an `if` on a tensor",
        6,
        12,
    ),
    (
        "exclude_eos_state_read_after_nested_loop",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            g = zeros(batch, hidden)
            for x_t in x:
                h = tanh(Linear(hidden)(x_t))
                out = []
                for t in range(3):
                    h = tanh(Linear(hidden)(h))
                    if end(reduce_sum(h, axis=hidden) > 0.0):
                        break
                    out.append(h)
                g = g + h
            return {"g": g}
        """,
        "RETURNN target: `h` is assigned before `if end(...): break` of a loop inside another loop, but the "
        "stacks are appended after it",
        7,
        8,
    ),
    (
        "mark_as_loss_in_loop",
        """
        from netc import mark_as_loss
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for x_t in x:
                mark_as_loss(reduce_sum(x_t, axis=feat), "l")
                out.append(x_t)
            return out
        """,
        "mark_as_loss inside a loop",
        6,
        8,
    ),
]
LOOP_CASES += [
    (
        "value_assigned_only_after_end_read_after_loop",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            out = []
            for t in range(x.max_seq_len):
                h = tanh(Linear(hidden)(h))
                out.append(h)
                if end(reduce_sum(h, axis=hidden) > 0.0):
                    break
                y = h * 2.0
            return {"output": out, "y": y}
        """,
        "`y` is assigned only after `if end(...): break` in the loop at line 9: a sequence that ends "
        "at its first step never assigns it, and it has no value before the loop; assign it before the loop",
        11,
        32,
    ),
    (
        "operator_on_stacked_list",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for x_t in x:
                out.append(x_t)
            return out + out
        """,
        "`out` is a list appended in a loop: when the model runs eagerly it is a Python list",
        6,
        11,
    ),
]
LOOP_CASES += [
    (
        "linear_with_a_name_not_a_dim",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            return Linear("nope")(x)
        """,
        "Linear(out_dim) needs a static dim",
        3,
        11,
    ),
]
LOOP_CASES += [
    (
        "outer_broadcast",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            out = []
            for x_t in x:
                out.append(h + x_t)
            return out
        """,
        "`+` of [batch, hidden] and [batch, feat] would broadcast to [batch, feat, hidden]",
        6,
        19,
    ),
    (
        "growing_list_read_in_its_loop",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            keys = []
            for x_t in x:
                keys.append(x_t)
                y = reduce_sum(keys, axis=time)
            return y
        """,
        "`keys` is read while the loop appends to it",
        6,
        12,
    ),
    (
        "stacking_the_whole_axis",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            out = []
            for x_t in x:
                out.append(x * 2.0)
            return out
        """,
        "cannot stack [batch, time, feat] over `time`: it already has that dim",
        5,
        8,
    ),
    (
        # a `choice` loop runs over its target's dim, known only when the loop closes
        "stacking_the_targets_dim_in_a_choice_loop",
        """
        from netc import Labels, choice, full, one_hot
        dec = Dim("dec")
        vocab = Dim("vocab", 5)
        @network
        def f(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
            label = full(batch, value=0, class_dim=vocab)
            labels, seen = [], []
            for _ in range(2 * x.max_seq_len):
                seen.append(one_hot(y) * 1.0)
                label = choice(Linear(vocab)(reduce_sum(x, axis=time)), target=y, beam=2)
                labels.append(label)
                if end(label == 0):
                    break
            return {"labels": labels, "seen": seen}
        """,
        "cannot stack [batch, dec, vocab] over `dec`: it already has that dim",
        9,
        8,
    ),
    (
        # a bound's floor division comes last: (n // k) * m is not (n * m) // k
        "max_seq_len_arithmetic_after_floordiv",
        """
        from netc import Labels, choice, full
        dec = Dim("dec")
        vocab = Dim("vocab", 5)
        @network
        def f(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
            label = full(batch, value=0, class_dim=vocab)
            labels = []
            for _ in range(x.max_seq_len // 2 * 3):
                label = choice(Linear(vocab)(reduce_sum(x, axis=time)), target=y, beam=2)
                labels.append(label)
                if end(label == 0):
                    break
            return labels
        """,
        "`max_seq_len`'s `// n` comes last (`(n * x.max_seq_len + m) // k`)",
        8,
        19,
    ),
    (
        # a second choice of a step extends the hypotheses the first made: one beam for both
        "two_choices_with_other_beams",
        """
        from netc import Labels, choice, full
        dec = Dim("dec")
        vocab = Dim("vocab", 5)
        pos = Dim("pos", 3)
        @network
        def f(x: Tensor[batch, time, feat], p: Labels[batch, dec, pos], y: Labels[batch, dec, vocab]):
            labels = []
            for _ in range(2 * x.max_seq_len):
                where = choice(Linear(pos)(reduce_sum(x, axis=time)), target=p, beam=2)
                label = choice(Linear(vocab)(reduce_sum(x, axis=time)), target=y, beam=3)
                labels.append(label)
                if end(label == 0):
                    break
            return labels
        """,
        "the choices of one loop share its dim and beam: this one's target is over `dec` with beam 3",
        10,
        16,
    ),
    (
        "two_choices_one_sampling",
        """
        from netc import Labels, choice, full
        dec = Dim("dec")
        vocab = Dim("vocab", 5)
        pos = Dim("pos", 3)
        @network
        def f(x: Tensor[batch, time, feat], p: Labels[batch, dec, pos], y: Labels[batch, dec, vocab]):
            labels = []
            for _ in range(2 * x.max_seq_len):
                where = choice(Linear(pos)(reduce_sum(x, axis=time)), target=p, beam=2)
                label = choice(Linear(vocab)(reduce_sum(x, axis=time)), target=y, beam=2, sample=True)
                labels.append(label)
                if end(label == 0):
                    break
            return labels
        """,
        "a loop with several choices searches by beam: `sample=True` is for one `choice` per loop",
        10,
        16,
    ),
    (
        # a position choice (target over an encoder's frames) takes scores over those frames
        "position_choice_scores_over_other_dim",
        """
        from netc import Labels, choice
        dec = Dim("dec")
        @network
        def f(x: Tensor[batch, time, feat], p: Labels[batch, dec, time]):
            positions = []
            for _ in range(2 * x.max_seq_len):
                where = choice(reduce_sum(x, axis=time), target=p, beam=2)
                positions.append(where)
                if end(where == 0):
                    break
            return positions
        """,
        "choice scores are float [batch, time] (the target's class dim), got float32[batch, feat]",
        7,
        16,
    ),
    (
        "input_named_self",
        """
        @network
        def f(self: Tensor[batch, time, feat]):
            return self
        """,
        "a network input cannot be named `self`",
        2,
        6,
    ),
    (
        "input_named_with_leading_underscores",
        """
        @network
        def f(__x: Tensor[batch, time, feat]):
            return __x
        """,
        "a network input cannot be named `__x`: Python mangles a leading `__`",
        2,
        6,
    ),
    (
        "empty_dim_name",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            d = Dim("")
            return x
        """,
        "a dim needs a name; '' is blank",
        3,
        8,
    ),
    (
        "blank_dim_name",
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            d = Dim("  ", 3)
            return x
        """,
        "a dim needs a name; '  ' is blank",
        3,
        8,
    ),
    (
        "lengths_argument_clash",
        """
        @network
        def f(x: Tensor[batch, time, feat], time_lens: Tensor[batch, feat]):
            return x
        """,
        "the lengths argument `time_lens` of dim `time` has the same name as input `time_lens`",
        2,
        6,
    ),
    (  # a model with `choice` is called with `search=...` (eager mode, the torch module)
        "input_named_search",
        """
        from netc import Labels, choice, full
        vocab = Dim("vocab", 5)
        @network
        def f(search: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
            label = full(batch, value=0, class_dim=vocab)
            out = []
            for _ in range(5):
                label = choice(Linear(vocab)(reduce_sum(search, axis=time)), target=y, beam=2)
                out.append(label)
                if end(label == 0):
                    break
            return out
        """,
        "input `search` has the same name as the argument `search` of a model with `choice`; rename the input",
        4,
        6,
    ),
    (  # a search whose only input is its target is given `batch_size`
        "target_named_batch_size",
        """
        from netc import Labels, choice, full
        vocab = Dim("vocab", 5)
        @network
        def f(batch_size: Labels[batch, time, vocab]):
            label = full(batch, value=0, class_dim=vocab)
            out = []
            for _ in range(5):
                label = choice(Linear(vocab)(zeros(batch, hidden)), target=batch_size, beam=2)
                out.append(label)
                if end(label == 0):
                    break
            return out
        """,
        "input `batch_size` has the same name as the argument `batch_size` of a search that takes no input",
        4,
        6,
    ),
]
CASES += LOOP_CASES


@pytest.mark.parametrize("name,body,message,line,col", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, netc, name, body, message, line, col):
    src = HEADER + textwrap.dedent(body).lstrip("\n")
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    proc = netc("compile", path.name, "--target", "returnn", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    first, source_line, caret = proc.stderr.splitlines()[:3]
    want_line = HEADER.count("\n") + line
    prefix = f"{name}.py:{want_line}:"
    assert first.startswith(prefix), first
    if col is not None:
        assert first.startswith(f"{prefix}{col + 1}: error: "), first
    assert message in first, first
    assert source_line.strip() == src.splitlines()[want_line - 1].strip()
    caret_col = caret.index("^") - 4
    assert source_line[4:][caret_col:] != "", "caret points past the line"
    if col is not None:
        assert caret_col == col


def test_errors_on_both_targets(tmp_path, netc):
    """The torch target reports the same located error (compilation is shared)."""
    src = HEADER + textwrap.dedent(CASES[0][1]).lstrip("\n")
    (tmp_path / "m.py").write_text(src)
    a = netc("compile", "m.py", "--target", "torch", cwd=tmp_path)
    b = netc("compile", "m.py", "--target", "returnn", cwd=tmp_path)
    assert a.returncode == b.returncode == 1
    assert a.stderr == b.stderr


def test_no_network_function(tmp_path, netc):
    (tmp_path / "m.py").write_text(HEADER)
    proc = netc("compile", "m.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("m.py: error: no @network function")
    assert "Traceback" not in proc.stderr
