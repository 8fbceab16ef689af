"""Misuse of a chunked loop's caches (`join_chunk`, `slice_static`, `to_chunk`, a `Conv1d` over a
static window): `file:line:col: error: ...`, the source line, a caret, exit code 1, no traceback."""

from __future__ import annotations

import pytest
from conftest import check_located_case

HEADER = """\
from netc import Conv1d, Dim, Tensor, batch, chunks, join_chunk, network, slice_static, to_chunk, zeros
time = Dim("time")
feat = Dim("feat", 4)
chunk = Dim("chunk", 3)
win = Dim("win", 2)
kv = Dim("kv", 5)
frames = Dim("frames", 3)
"""

SIG = "def f(x: Tensor[batch, time, feat]):"
LOOP = ["m = zeros(batch, win, feat)", "ys = []", "for c in chunks(x, chunk):"]
JOIN = "    j = join_chunk(m, c, cache_axis=win, axis=chunk, out_axis=kv)"
END = ["    ys.append(c)", "    m = slice_static(j, axis=kv, start=3, out_axis=win)", "return ys"]

CASES = [
    (
        "join_outside_a_chunked_loop",
        ["m = zeros(batch, win, feat)", "return join_chunk(m, x, cache_axis=win, axis=time, out_axis=kv)"],
        "`join_chunk` needs `axis` to be the chunk dim of a chunked loop it is in, got 'time'",
        2,
        "join_chunk(",
    ),
    (
        "join_window_size",
        [*LOOP, "    j = join_chunk(m, c, cache_axis=win, axis=chunk, out_axis=Dim('kv6', 6))", *END],
        "`join_chunk` needs `kv6` to have |win| + N = 2 + 3 = 5 frames (N: the chunk's most frames), got 6",
        4,
        "join_chunk(",
    ),
    (
        "join_cache_dims",
        [*LOOP, "    j = join_chunk(zeros(batch, win), c, cache_axis=win, axis=chunk, out_axis=kv)", *END],
        "`join_chunk` needs the cache's dims to be x's with `win` for `chunk`",
        4,
        "join_chunk(",
    ),
    (
        "slice_past_the_end",
        [*LOOP, JOIN, "    ys.append(c)", "    m = slice_static(j, axis=kv, start=4, out_axis=win)", "return ys"],
        "`slice_static` needs `start` to be an int with 0 <= start and start + |win| (2) <= |kv| (5), got 4",
        6,
        "slice_static(",
    ),
    (
        "to_chunk_not_n_frames",
        [
            *LOOP,
            JOIN,
            "    ys.append(to_chunk(slice_static(j, axis=kv, start=0, out_axis=win), axis=win, like=c))",
            "    m = slice_static(j, axis=kv, start=3, out_axis=win)",
            "return ys",
        ],
        "`to_chunk` needs `win` to have the chunk's N = 3 frames, got 2",
        5,
        "to_chunk(",
    ),
    (
        "conv_static_window_same",
        [*LOOP, JOIN, "    ys.append(Conv1d(feat, 3)(j, axis=kv))", *END[1:]],
        "`Conv1d` needs `axis` to be a dynamic dim of [batch, feat, kv] (or a static window, with "
        "padding='causal' and a static `out_axis`)",
        5,
        "Conv1d(",
    ),
    (
        "conv_static_window_results",
        [*LOOP, JOIN, "    ys.append(Conv1d(feat, 2, padding='causal')(j, axis=kv, out_axis=frames))", *END[1:]],
        "`Conv1d` over `kv` (5 frames) gives 4 results: `out_axis` `frames` has 3",
        5,
        "Conv1d(",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, case):
    check_located_case(tmp_path, HEADER, SIG, case, target="torch")
