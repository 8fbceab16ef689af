"""netc's names are used as Python names: the compiler accepts one only where the model imports
it, as eager mode (which runs the file) needs. Real CLI on files written to disk."""

from __future__ import annotations

import textwrap

import pytest

BODY = """\
time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def f(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    n = zeros(batch)
    while True:
        n = n + 1.0
        if {end}(n > 2.5):
            break
    label = argmax(zeros(batch, vocab), axis=vocab)
    labels = []
    for _ in range(x.max_seq_len):
        label = {choice}({softmax}(Linear(vocab)(Embedding(feat)(label)), axis=vocab), target=y, beam=2)
        labels.append(label)
        if {end}(label == 0):
            break
    return {{"labels": labels, "n": n}}
"""
NAMES = ["Dim", "Embedding", "Labels", "Linear", "Tensor", "argmax", "batch", "network", "zeros"]


def _model(imported: list[str], end: str = "end", choice: str = "choice", softmax: str = "softmax") -> str:
    header = f"import netc as nc\nfrom netc import {', '.join(NAMES + imported)}\n\n"
    return header + BODY.format(end=end, choice=choice, softmax=softmax)


@pytest.mark.parametrize("missing", ["end", "choice", "softmax"])
def test_a_netc_name_used_without_its_import(tmp_path, netc, missing):
    """Located at its first use (eager mode raised NameError there; the compiler accepted `end`)."""
    text = _model([n for n in ("end", "choice", "softmax") if n != missing])
    (tmp_path / "m.py").write_text(text, encoding="utf-8")
    line = next(i for i, s in enumerate(text.splitlines(), 1) if f"{missing}(" in s)
    col = text.splitlines()[line - 1].index(f"{missing}(") + 1
    proc = netc("compile", "m.py", "--target", "torch", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first == f"m.py:{line}:{col}: error: `{missing}` is not imported: add `from netc import {missing}`"


def test_netc_names_by_alias_and_module_attribute(tmp_path, netc):
    """`from netc import end as stop` and `nc.end` of `import netc as nc` are netc's `end`."""
    text = _model(["end as stop", "choice", "softmax"], end="stop").replace(
        "        if stop(label == 0):", "        if nc.end(label == 0):"
    )
    (tmp_path / "m.py").write_text(textwrap.dedent(text), encoding="utf-8")
    proc = netc("verify", "m.py", "--seed", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "labels           eager vs torch" in proc.stdout and "n                eager vs returnn" in proc.stdout
