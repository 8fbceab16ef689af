"""`free_after_last_use`: a `del` after a local's last read, never before a later read, never of a
name only some paths assign or a nested function reads; the method computes what it did."""

from __future__ import annotations

import textwrap

from netc.emit_torch.free import free_after_last_use

BODY = textwrap.indent(
    textwrap.dedent(
        """\
        a = x + 1
        b = a * 2
        if x > 0:
            c = b
        d = [b]
        for t in range(3):
            d.append(a + t)
        def step(v):
            return v + e
        e = 5
        f = step(d[-1])
        return f + b
        """
    ),
    "        ",
)


def _run(body: str, x: int) -> int:
    scope: dict = {}
    exec(f"def method(x):\n{body}", scope)  # noqa: S102 - the test's own code
    return scope["method"](x)


def test_dels_follow_last_reads_and_keep_the_result():
    out = free_after_last_use(BODY, keep={"x"})
    lines = [line.strip() for line in out.splitlines()]
    # a: after the loop that last reads it; d: after its last read; not b and f (the return reads
    # them), c (one path assigns it), e and step (the nested function reads e; step is no assignment)
    assert [(lines[i - 1], line) for i, line in enumerate(lines) if line.startswith("del ")] == [
        ("d.append(a + t)", "del a"),
        ("f = step(d[-1])", "del d"),
    ]
    assert _run(out, 3) == _run(BODY, 3) and _run(out, -1) == _run(BODY, -1)


def test_the_inputs_named_in_keep_stay():
    out = free_after_last_use("        y = x * 2\n        z = y + 1\n        return z\n", keep={"x"})
    assert out.splitlines() == ["        y = x * 2", "        z = y + 1", "        del y", "        return z"]
