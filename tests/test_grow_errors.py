"""Misuse of states grown by `cum_concat` (and their `empty` start): `file:line:col: error: ...`,
the source line, a caret, exit code 1, no traceback (as in test_errors.py)."""

from __future__ import annotations

import pytest
from conftest import check_located_case

HEADER = """\
from netc import Dim, Linear, Tensor, batch, cum_concat, dot, empty, network, reduce_sum, softmax, zeros
time = Dim("time")
hist = Dim("hist")
feat = Dim("feat", 4)
"""

SIG = "def f(x: Tensor[batch, time, feat]):"
LOOP = ["h = empty(batch, hist, feat)", "out = []", "for x_t in x:"]
GROW = "    h = cum_concat(h, x_t, axis=hist)"
READ = "    out.append(reduce_sum(h, axis=hist))"

# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
CASES = [
    (
        "outside_a_loop",
        ["return cum_concat(empty(batch, hist, feat), reduce_sum(x, axis=time), axis=hist)"],
        "`cum_concat(state, frame, axis=d)` grows a loop state",
        1,
        "cum_concat(",
    ),
    (
        "not_assigned_back",
        [*LOOP, "    g = cum_concat(h, x_t, axis=hist)", "    out.append(reduce_sum(g, axis=hist))", "return out"],
        "`cum_concat(state, frame, axis=d)` grows a loop state",
        4,
        "cum_concat(",
    ),
    (
        "previous_frames_read",
        [*LOOP, "    s = reduce_sum(h, axis=hist)", GROW, "    out.append(s)", "return out"],
        "`h` grows by `cum_concat` in this loop: its frames before this step are read only by its `cum_concat`",
        4,
        "reduce_sum(",
    ),
    (
        "read_after_the_loop",
        [*LOOP, GROW, READ, "return {'output': out, 'all': reduce_sum(h, axis=hist)}"],
        "a value over `hist` here: `hist` is grown in the loop at line 9, and values over it exist only in that loop",
        6,
        "reduce_sum(h",
    ),
    (
        "stacked",
        [*LOOP, GROW, "    out.append(h)", "return reduce_sum(out, axis=hist)"],
        "`out` stacks a value over `hist`, which has another length at each step; reduce over it before appending",
        3,
        "for",
    ),
    (
        "backward_loop",
        ["h = empty(batch, hist, feat)", "out = []", "for x_t in reversed(x):", GROW, READ, "return out"],
        "`cum_concat` in a backward loop",
        4,
        "cum_concat(",
    ),
    (
        "empty_read",
        ["return reduce_sum(reduce_sum(empty(batch, hist, feat), axis=hist), axis=feat) + reduce_sum(x, axis=time)"],
        "`empty(...)` starts a state that `cum_concat` grows in a loop; it has no frames to read",
        1,
        "reduce_sum(empty",
    ),
    (
        "before_its_cum_concat",
        [
            *LOOP,
            "    z = zeros(batch, hist)",
            GROW,
            "    out.append(dot(softmax(z, axis=hist), h, reduce=hist))",
            "return out",
        ],
        "a value over `hist` before the `cum_concat` that grows it in this step",
        4,
        "zeros(",
    ),
    (
        "empty_two_dynamic_dims",
        ["h = empty(batch, hist, time, feat)", "return x"],
        "`empty(batch, hist_time, ...)` takes the batch, one dynamic dim",
        1,
        "empty(",
    ),
    (
        "frame_of_other_dims",
        [*LOOP, "    h = cum_concat(h, Linear(Dim('other', 3))(x_t), axis=hist)", READ, "return out"],
        "`cum_concat` appends a frame with the state's dims but `hist`",
        4,
        "cum_concat(",
    ),
    (
        "input_dim",
        ["h = empty(batch, time, feat)", "return x"],
        "`time` already has lengths",
        1,
        "empty(",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, case):
    check_located_case(tmp_path, HEADER, SIG, case, target="torch")


def test_returnn_target_needs_a_step_value_beside_a_grown_one(tmp_path, netc):
    """RETURNN runs a `cum_concat` no state needs after the loop, without the step axis: a layer
    reading a grown value and nothing of the step would lose it (the torch target takes it)."""
    body = [*LOOP, GROW, "    out.append(reduce_sum(h, axis=hist))", "return out"]
    message = "RETURNN target: this reads a value over `hist` (grown by `cum_concat`) and nothing that changes per step"
    check_located_case(tmp_path, HEADER, SIG, ("grown_only", body, message, 5, "reduce_sum("))
    assert netc("compile", "grown_only.py", "--target", "torch", cwd=tmp_path).returncode == 0
