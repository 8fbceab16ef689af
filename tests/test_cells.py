"""`Lstm` (RETURNN `nativelstm2`): verified through the real CLI on all three backends, its
RETURNN variables are exactly the model's parameters, misuse is a located error."""

from __future__ import annotations

import pytest
from conftest import ROOT, assert_located_error, returnn_variables

MODEL = ROOT / "tests" / "models" / "native_lstm.py"


def test_native_lstm_verifies(verify):
    proc = verify(MODEL, "--seed", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    for out in ("output", "hidden"):
        for backend in ("torch", "returnn"):
            assert f"eager vs {backend}" in proc.stdout
            line = next(ln for ln in proc.stdout.splitlines() if ln.split()[:4] == [out, "eager", "vs", backend])
            assert float(line.split("=")[1].split()[0]) <= 1e-4, line


def test_returnn_variables_are_the_model_params():
    """Names and shapes: `<module path>/W`, `/W_re`, `/b` in RETURNN's own layout."""
    from netc.compiler import compile_graph
    from netc.emit_tf.emitter import emit_returnn

    g = compile_graph(str(MODEL))
    want = {p.name: tuple(g.dim(d).size for d in p.dims) for p in g.params}
    # the Lstm's module path is `h` (the assigned variable); proj 4, hidden 6: 4 gate blocks of 6
    assert {k: v for k, v in want.items() if k.startswith("h/")} == {"h/W": (4, 24), "h/W_re": (6, 24), "h/b": (24,)}
    got, _, _ = returnn_variables(emit_returnn(g))
    assert got == want


HEADER = """\
from netc import Dim, Linear, Lstm, Tensor, batch, expand, network
time = Dim("time")
frames = Dim("frames")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)
@network
"""


@pytest.mark.parametrize(
    "name,body,message",
    [
        ("two_dynamic", ["both = x + expand(y, time)", "return Lstm(hidden)(both)"], "exactly one dynamic dim"),
        (
            "no_dynamic",  # a frame inside a loop has no dynamic dim left
            ["out = []", "for x_t in x:", "    out.append(Lstm(hidden)(x_t))", "return {'output': out}"],
            "exactly one dynamic dim",
        ),
    ],
)
def test_lstm_misuse_is_a_located_error(tmp_path, netc, name, body, message):
    sig = "def f(x: Tensor[batch, time, feat], y: Tensor[batch, frames, feat]):"
    src = HEADER + sig + "\n" + "".join(f"    {b}\n" for b in body)
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    proc = netc("compile", path.name, "--target", "returnn", cwd=tmp_path)
    want_line = next(i for i, ln in enumerate(src.splitlines(), 1) if "Lstm(" in ln and "import" not in ln)
    assert_located_error(proc, src, path.name, want_line, "Lstm(", message)
