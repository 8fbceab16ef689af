"""Misuse of chunked loops (`for c in chunks(x, chunk)`) and of the unrolled static `range`:
`file:line:col: error: ...`, the source line, a caret, exit code 1, no traceback (as in
test_errors.py)."""

from __future__ import annotations

import pytest
from conftest import check_located_case

HEADER = """\
from netc import Dim, Linear, Tensor, batch, chunks, end, expand, network, reduce_sum, tanh, unstack, zeros
time = Dim("time")
enc = Dim("enc")
feat = Dim("feat", 4)
chunk = Dim("chunk", 3)
"""

SIG = "def f(x: Tensor[batch, time, feat], e: Tensor[batch, enc, feat]):"
LOOP = ["ys = []", "for c in chunks(x, chunk):"]
STACK = ["    ys.append(tanh(c))", "return ys"]

# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
CASES = [
    (
        "read_after_the_loop",
        [*LOOP, "    y = tanh(c)", "    ys.append(y)", "return reduce_sum(y, axis=chunk)"],
        "`y` is over the chunk dim `chunk` of the chunked loop at line 9, whose length is each step's; "
        "append it to a list in the loop to read it over `time`",
        5,
        "y,",
    ),
    (
        "chunk_dim_after_the_loop",
        [*LOOP, "    ys.append(c)", "return {'c': ys, 'n': reduce_sum(zeros(batch, chunk), axis=chunk)}"],
        "a value over `chunk` here: `chunk` is the chunk dim of the chunked loop at line 9, and values over it "
        "exist only in that loop",
        4,
        "zeros(",
    ),
    (
        "chunks_not_in_a_loop",
        ["y = chunks(x, chunk)", "return tanh(y)"],
        "`tanh` expects a tensor, got `chunks(...)`, which only a loop iterates over",
        2,
        "tanh(",
    ),
    (
        "dynamic_chunk_dim",
        ["ys = []", "for c in chunks(x, Dim('c2')):", *STACK],
        "`chunks` needs a static Dim for the chunk's frames (Dim('c2', N)), got `c2`",
        2,
        "chunks(",
    ),
    (
        "chunk_dim_used_before",
        ["z = zeros(batch, chunk)", *LOOP, *STACK],
        "`chunk` is used before (line 8): a chunk dim is dynamic, the frames of each step's chunk",
        3,
        "chunks(",
    ),
    (
        "chunk_dim_of_another_loop",
        [*LOOP, "    ys.append(tanh(c))", "zs = []", "for d in chunks(x, chunk):", "    zs.append(d)", "return ys, zs"],
        "`chunk` is the chunk dim of another chunked loop; declare a Dim of its own for each",
        5,
        "chunks(",
    ),
    (
        "in_another_loop",
        ["ys = []", "for x_t in x:", "    for c in chunks(e, chunk):", "        ys.append(c)", "return ys"],
        "a chunked loop inside another loop is not supported",
        3,
        "chunks(",
    ),
    (
        "several_dynamic_dims",
        ["ys = []", "for c in chunks(expand(x, enc), chunk):", *STACK],
        "`chunks` of [batch, time, enc, feat] needs `axis=` (the dynamic dim to split)",
        2,
        "chunks(",
    ),
    (
        "not_a_dim",
        ["ys = []", "for c in chunks(x, 3):", *STACK],
        "use chunks(x, chunk) with a tensor and a static Dim",
        2,
        "chunks(",
    ),
    (
        "axis_not_dynamic",
        ["ys = []", "for c in chunks(x, chunk, axis=feat):", *STACK],
        "`feat` is not a dynamic dim of the tensor [batch, time, feat]",
        2,
        "chunks(",
    ),
    (
        "with_end",
        [
            *LOOP,
            "    ys.append(c)",
            "    if end(reduce_sum(reduce_sum(c, axis=chunk), axis=feat) > 0):",
            "        break",
            "return ys",
        ],
        "`if end(cond): break` needs `for t in range(n)` or `while True`",
        4,
        "if end(",
    ),
    (
        "loop_over_the_chunk",
        [*LOOP, "    zs = []", "    for f in c:", "        zs.append(tanh(f))", "    ys.append(zs)", "return ys"],
        "a loop over the chunk dim `chunk` (each step's chunk) is not supported",
        4,
        "c:",
    ),
    (
        "unstack_the_chunk",
        [
            *LOOP,
            "    zs = []",
            "    for f in unstack(c, axis=chunk):",
            "        zs.append(tanh(f))",
            "    ys.append(zs)",
            "return ys",
        ],
        "a loop over the chunk dim `chunk` (each step's chunk) is not supported",
        4,
        "unstack(",
    ),
    (
        "range_module_other_arguments",
        ["dims = [Dim('h', 4), Dim('g', 4)]", "for k in range(2):", "    x = tanh(Linear(dims[k])(x))", "return x"],
        "`Linear` is constructed here again with other arguments: one constructor call is one module",
        3,
        "Linear(",
    ),
    (
        "range_with_end",
        [
            "for k in range(1, 3):",
            "    x = tanh(x)",
            "    if end(reduce_sum(reduce_sum(x, axis=time), axis=feat) > 0):",
            "        break",
            "return x",
        ],
        "`if end(cond): break` needs `for t in range(n)` or `while True`",
        3,
        "if end(",
    ),
    (
        "range_break",
        ["for k in range(3):", "    x = tanh(x)", "    break", "return x"],
        "`break`/`continue` in a loop over a static `range` are not supported",
        3,
        "break",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, case):
    check_located_case(tmp_path, HEADER, SIG, case, target="torch")
