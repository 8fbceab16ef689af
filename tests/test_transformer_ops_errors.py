"""Misuse of the transformer/conformer ops (sin, cos, logsumexp, one_hot, range_over,
slice_frames, pad_frames, shift_right, replace_dim): `file:line:col: error: ...`, the source line,
a caret, exit code 1, no traceback. Each case is a model file compiled by the real CLI."""

from __future__ import annotations

import pytest
from conftest import check_located_case

HEADER = """\
from netc import (Dim, Labels, Tensor, batch, cos, logsumexp, max_pool, network, one_hot, pad_frames, range_over,
                  replace_dim, shift_right, sin, slice_frames)
time = Dim("time")
frames = Dim("frames")
pooled = Dim("pooled")
feat = Dim("feat", 6)
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 4)
"""

SIG = "def f(x: Tensor[batch, time, feat], y: Labels[batch, frames, vocab]):"

# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
CASES = [
    ("one_hot_of_float", ["return one_hot(x)"], "`one_hot` needs labels with a class dim", 1, "one_hot("),
    ("sin_of_labels", ["return sin(y)"], "`sin` needs float tensors, got int32", 1, "sin("),
    ("cos_of_labels", ["return cos(y)"], "`cos` needs float tensors, got int32", 1, "cos("),
    ("logsumexp_of_labels", ["return logsumexp(y, axis=frames)"], "`logsumexp` needs a float tensor", 1, "logsumexp("),
    ("logsumexp_over_batch", ["return logsumexp(x, axis=batch)"], "cannot reduce over the batch dim", 1, "logsumexp("),
    (
        "logsumexp_over_other_dim",
        ["return logsumexp(x, axis=frames)"],
        "cannot reduce over `frames`: not a dim of [batch, time, feat]",
        1,
        "logsumexp(",
    ),
    ("range_over_batch", ["return range_over(batch)"], "`range_over(dim)` takes a dim other than batch", 1, "range_"),
    (
        "range_over_bool",
        ["return range_over(time, dtype='bool')"],
        "`range_over` dtype must be 'int32' or 'float32', got 'bool'",
        1,
        "range_over(",
    ),
    (
        "range_over_before_lengths",
        ["r = range_over(pooled)", "return max_pool(x, axis=time, size=2, out_axis=pooled) + r"],
        "`range_over` over dynamic dim `pooled`, whose lengths are not known here",
        1,
        "range_over(",
    ),
    (
        "slice_static_axis",
        ["return slice_frames(x, axis=feat, stop=-1, out_axis=pooled)"],
        "`slice_frames` needs `axis` to be a dynamic dim of [batch, time, feat]",
        1,
        "slice_frames(",
    ),
    (
        "slice_onto_input_dim",
        ["return slice_frames(x, axis=time, stop=-1, out_axis=frames)"],
        "`frames` already has lengths",
        1,
        "slice_frames(",
    ),
    (
        "slice_float_bound",
        ["return slice_frames(x, axis=time, start=0.5, out_axis=pooled)"],
        "`slice_frames` takes integer bounds (or None), got start=0.5",
        1,
        "slice_frames(",
    ),
    (
        "slice_without_bounds",
        ["return slice_frames(x, axis=time, out_axis=pooled)"],
        "`slice_frames` without `start` and `stop` would copy the frames",
        1,
        "slice_frames(",
    ),
    (
        "slice_in_loop",
        [
            "out = []",
            "for x_t in x:",
            "    out.append(slice_frames(x, axis=time, stop=-1, out_axis=pooled))",
            "return out",
        ],
        "`slice_frames` makes a dim, which a loop body cannot: call it before the loop",
        3,
        "slice_frames(",
    ),
    (
        "pad_negative",
        ["return pad_frames(x, axis=time, left=-1, out_axis=pooled)"],
        "`pad_frames` pads by integers left, right >= 0, not both 0; got -1, 0",
        1,
        "pad_frames(",
    ),
    (
        "pad_nothing",
        ["return pad_frames(x, axis=time, out_axis=pooled)"],
        "`pad_frames` pads by integers left, right >= 0, not both 0; got 0, 0",
        1,
        "pad_frames(",
    ),
    (
        "pad_labels_with_float",
        ["return pad_frames(y, axis=frames, right=1, value=0.5, out_axis=pooled)"],
        "`pad_frames` of an int tensor fills with an integer, got 0.5",
        1,
        "pad_frames(",
    ),
    (
        "pad_float_with_string",
        ["return pad_frames(x, axis=time, right=1, value='eos', out_axis=pooled)"],
        "`pad_frames` of a float tensor fills with a number, got 'eos'",
        1,
        "pad_frames(",
    ),
    (
        "pad_onto_static_dim",
        ["return pad_frames(x, axis=time, right=1, out_axis=hidden)"],
        "`pad_frames` makes a dynamic dim; `hidden` is not one",
        1,
        "pad_frames(",
    ),
    (
        "shift_label_outside_classes",
        ["return shift_right(y, axis=frames, value=7)"],
        "label 7 is not a class of `vocab` (0..4)",
        1,
        "shift_right(",
    ),
    (
        "shift_by_zero",
        ["return shift_right(x, axis=time, amount=0)"],
        "`shift_right` moves frames by an integer `amount` >= 1, got 0",
        1,
        "shift_right(",
    ),
    (
        "shift_over_other_dim",
        ["return shift_right(x, axis=frames)"],
        "`shift_right` needs `axis` to be a dynamic dim of [batch, time, feat]",
        1,
        "shift_right(",
    ),
    (
        "replace_static_axis",
        ["return replace_dim(x, axis=feat, out_axis=pooled)"],
        "`replace_dim` needs `axis` to be a dynamic dim of [batch, time, feat]",
        1,
        "replace_dim(",
    ),
    (
        "replace_twice_onto_one_dim",
        ["k = replace_dim(x, axis=time, out_axis=pooled)", "return replace_dim(x, axis=time, out_axis=pooled)"],
        "`pooled` already has lengths (of an input, a loop or another op)",
        2,
        "replace_dim(",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, case):
    check_located_case(tmp_path, HEADER, SIG, case, target="returnn")


REL_CASES = [
    (
        "rel_positions_static_axis",
        ["return rel_positions(axis=feat, out_axis=pooled)"],
        "`rel_positions` needs `axis`, which must be a dynamic dim",
        1,
        "rel_positions(",
    ),
    (
        "rel_positions_bool",
        ["return rel_positions(axis=time, out_axis=pooled, dtype='bool')"],
        "`rel_positions` dtype must be 'int32' or 'float32', got 'bool'",
        1,
        "rel_positions(",
    ),
    (
        "rel_positions_onto_input_dim",
        ["return rel_positions(axis=time, out_axis=frames)"],
        "`frames` already has lengths",
        1,
        "rel_positions(",
    ),
    (
        "rel_shift_without_rel_axis",
        ["return rel_shift(x, axis=pooled, query_axis=time, kv_axis=frames)"],
        "`rel_shift` needs `axis` to be a dynamic dim of [batch, time, feat]",
        1,
        "rel_shift(",
    ),
    (
        "rel_shift_onto_own_dim",
        [
            "r = rel_positions(axis=time, out_axis=pooled, dtype='float32')",
            "s = expand(r, time)",
            "return rel_shift(s, axis=pooled, query_axis=time, kv_axis=time)",
        ],
        "`rel_shift`: `time` is already a dim of [batch, time, pooled]",
        3,
        "rel_shift(",
    ),
    (
        "rel_shift_of_ints",
        [
            "r = expand(rel_positions(axis=time, out_axis=pooled), time)",
            "return rel_shift(r, axis=pooled, query_axis=time, kv_axis=frames)",
        ],
        "`rel_shift` needs a float tensor, got int32",
        2,
        "rel_shift(",
    ),
]


@pytest.mark.parametrize("case", REL_CASES, ids=[c[0] for c in REL_CASES])
def test_located_error_of_relative_positions(tmp_path, case):
    header = HEADER.replace("from netc import (", "from netc import (expand, rel_positions, rel_shift, ", 1)
    check_located_case(tmp_path, header, SIG, case)


CHUNK_CASES = [
    (
        "chunk_mask_static_axis",
        ["return chunk_mask(query_axis=feat, kv_axis=frames, chunk_size=2, left_chunks=1)"],
        "`chunk_mask` needs `query_axis` to be a dynamic dim, got 'feat'",
        1,
        "chunk_mask(",
    ),
    (
        "chunk_mask_batch_kv",
        ["return chunk_mask(query_axis=time, kv_axis=batch, chunk_size=2, left_chunks=1)"],
        "`chunk_mask` needs `kv_axis` to be a dynamic dim, got 'batch'",
        1,
        "chunk_mask(",
    ),
    (
        "chunk_mask_same_dim",
        ["return chunk_mask(query_axis=time, kv_axis=time, chunk_size=2, left_chunks=1)"],
        "`chunk_mask` needs two dims: the keys' view of `time` (`replace_dim(x, axis=time, out_axis=kv_time)`)",
        1,
        "chunk_mask(",
    ),
    (
        "chunk_mask_zero_size",
        ["return chunk_mask(query_axis=time, kv_axis=frames, chunk_size=0, left_chunks=1)"],
        "`chunk_mask` needs `chunk_size` to be an int >= 1 (frames per chunk), got 0",
        1,
        "chunk_mask(",
    ),
    (
        "chunk_mask_float_size",
        ["return chunk_mask(query_axis=time, kv_axis=frames, chunk_size=2.0, left_chunks=1)"],
        "`chunk_mask` needs `chunk_size` to be an int >= 1 (frames per chunk), got 2.0",
        1,
        "chunk_mask(",
    ),
    (
        "chunk_mask_negative_left",
        ["return chunk_mask(query_axis=time, kv_axis=frames, chunk_size=2, left_chunks=-1)"],
        "`chunk_mask` needs `left_chunks` to be an int >= 0 (chunks of left context) or None, got -1",
        1,
        "chunk_mask(",
    ),
    (
        "chunk_mask_bool_left",
        ["return chunk_mask(query_axis=time, kv_axis=frames, chunk_size=2, left_chunks=True)"],
        "`chunk_mask` needs `left_chunks` to be an int >= 0 (chunks of left context) or None, got True",
        1,
        "chunk_mask(",
    ),
    (
        "chunk_mask_tensor_size",
        ["return chunk_mask(query_axis=time, kv_axis=frames, chunk_size=x, left_chunks=1)"],
        "bad argument to `chunk_mask`: a tensor [batch, time, feat]",
        1,
        "chunk_mask(",
    ),
    (
        "chunk_mask_before_lengths",
        [
            "m = chunk_mask(query_axis=time, kv_axis=pooled, chunk_size=2, left_chunks=1)",
            "return max_pool(x, axis=time, size=2, out_axis=pooled), m",
        ],
        "`chunk_mask` over dynamic dim `pooled`, whose lengths are not known here",
        1,
        "chunk_mask(",
    ),
    (
        "chunk_mask_missing_left",
        ["return chunk_mask(query_axis=time, kv_axis=frames, chunk_size=2)"],
        "left_chunks",
        1,
        "chunk_mask(",
    ),
]


@pytest.mark.parametrize("case", CHUNK_CASES, ids=[c[0] for c in CHUNK_CASES])
def test_located_error_of_chunk_mask(tmp_path, case):
    header = HEADER.replace("from netc import (", "from netc import (chunk_mask, ", 1)
    check_located_case(tmp_path, header, SIG, case)
