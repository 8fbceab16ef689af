"""The random-program differential tester in CI (tests/diffgen; docs/design.md).

Each run checks CHUNKS * CHUNK = 60 generated models on eager, torch and RETURNN (every pass
option set), using the features not known to fail (`GREEN`). The seeds rotate with the
history, reproducibly: base = 60 * (number of commits, `git rev-list --count HEAD`; 0 without
git), so seeds base .. base+59. Override with NETC_DIFFGEN_BASE. Reproduce one program with
`python -m tests.diffgen --green --n 1 --seed-start SEED`.

Every program must agree, or be refused with a located error of a documented limitation.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import ROOT
from diffgen.gen import GREEN, generate
from diffgen.known import documented
from diffgen.run import check_program

CHUNK = 10
CHUNKS = 6


def seed_base() -> int:
    if "NETC_DIFFGEN_BASE" in os.environ:
        return int(os.environ["NETC_DIFFGEN_BASE"])
    try:
        out = subprocess.run(
            ["git", "rev-list", "--count", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        return CHUNK * CHUNKS * int(out.strip())
    except (OSError, subprocess.CalledProcessError, ValueError):
        return 0


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_programs_agree(chunk):
    base = seed_base() + chunk * CHUNK
    bad = []
    for seed in range(base, base + CHUNK):
        rep = check_program(generate(seed, set(GREEN)))
        for f in rep.failures:
            if f.kind != "refused" or not documented(f.detail):
                bad.append(f"seed {seed}: {f.kind} {f.backend} [{f.options}] {f.detail}")
    assert not bad, (
        f"seeds {base}..{base + CHUNK - 1} (reproduce: python -m tests.diffgen --green --n 1 --seed-start SEED):\n"
        + "\n".join(bad)
    )


def test_generator_is_valid_by_construction(tmp_path):
    """500 generated models (green features) compile without errors, except documented refusals."""
    from netc.compiler import compile_graph
    from netc.errors import CompileError

    bad = []
    used = set()
    for seed in range(500):
        prog = generate(seed, set(GREEN))
        used |= prog.features
        path = tmp_path / f"m{seed}.py"
        path.write_text(prog.source)
        try:
            compile_graph(str(path))
        except CompileError as e:
            if not documented(f"{e.span.line if e.span else '(no location)'}: {e.message}"):
                bad.append(f"seed {seed}: {e.message}")
    assert not bad, "\n".join(bad)
    assert {"loop_iter", "loop_while", "tensor_if", "attention"} <= used, sorted(used)


# seeds whose programs found a target's fault, checked on every run: 45021, a `Conv2d` with a
# feature stride and one window over the features, which TensorFlow's oneDNN convolution computes
# wrong (RETURNN's lowering now convolves at feature stride 1 and slices the window's column;
# the harness's inputs reproduce it, `netc verify`'s did not); 67738, `expand` of a loop's frame
# over a dim a layer made, which RETURNN's `switch` put elsewhere in the frames' template than in
# the layer it moved out of the loop (tests/diffgen/found/returnn_whole_axis_last_batch_axis.py)
FOUND_SEEDS = [45021, 67738]


@pytest.mark.parametrize("seed", FOUND_SEEDS)
def test_found_programs_agree(seed):
    rep = check_program(generate(seed))
    bad = [f"{f.kind} {f.backend} [{f.options}] {f.detail}" for f in rep.failures]
    assert not bad and rep.outcome == "agree", (rep.outcome, bad)
