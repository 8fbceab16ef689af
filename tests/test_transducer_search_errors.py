"""Misuse of `transducer_search`: `file:line:col: error: ...`, the source line, a caret, exit code
1, no traceback (each case a model file compiled by the real CLI); and RETURNN's refusal."""

from __future__ import annotations

import pytest
from conftest import ROOT, check_located_case, run_netc

HEADER = """\
from netc import Dim, Embedding, Linear, Module, Tensor, batch, concat, network, tanh, transducer_search, zeros
time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 4)
blank = Dim("blank", 1)
hidden = Dim("hidden", 5)
def predict(label, s):
    s = tanh(Linear(hidden)(concat(Embedding(hidden)(label), s)))
    return s, s
def joint(e, p):
    return Linear(vocab + blank)(tanh(e + p))
def joint_vocab(e, p):
    return Linear(vocab)(tanh(e + p))
def predict_fresh(label, s):
    return zeros(batch, hidden), s
class Closure(Module):
    def __init__(self, h):
        self.h = h
    def __call__(self, label, s):
        return s + self.h, s
"""

SIG = "def f(x: Tensor[batch, time, feat]):"
ENC = "enc = Linear(hidden)(x)"


def _header_line(text: str) -> int:
    """A line of HEADER as a case's body line (counted from the signature's next line)."""
    return HEADER.splitlines().index(text) + 1 - HEADER.count("\n") - 2


def _search(**kw: str) -> str:
    args = {
        "axis": "time",
        "predict": "predict",
        "joint": "joint",
        "state": "zeros(batch, hidden)",
        "label_dim": "vocab",
        "start": "0",
        "out_axis": "dec",
        **kw,
    }
    return "labels, scores = transducer_search(enc, " + ", ".join(f"{k}={v}" for k, v in args.items()) + ")"


# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
CASES = [
    (
        "joint_without_blank",
        [ENC, _search(joint="joint_vocab"), "return labels"],
        "`transducer_search`: `joint(enc_frame, out)` must return scores [batch, vocab + blank] (5 classes), "
        "got [batch, vocab]",
        2,
        "transducer_search(",
    ),
    (
        "dynamic_label_dim",
        [ENC, _search(label_dim="dec", out_axis="time"), "return labels"],
        "`transducer_search` needs `label_dim` to be a static dim (the labels), got `dec`",
        2,
        "transducer_search(",
    ),
    (
        "unknown_method",
        [ENC, _search(method='"beam"'), "return labels"],
        "`transducer_search` method must be one of 'greedy', 'modified', 'time_sync', 'graves'",
        2,
        "transducer_search(",
    ),
    (
        "zero_beam",
        [ENC, _search(beam="0"), "return labels"],
        "`transducer_search` needs `beam` to be an int >= 1, got 0",
        2,
        "transducer_search(",
    ),
    (
        "start_outside_labels",
        [ENC, _search(start="4"), "return labels"],
        "`transducer_search` needs `start` to be a label of `vocab` (0 to 3)",
        2,
        "transducer_search(",
    ),
    (
        "batch_made_in_predict",
        [ENC, _search(predict="predict_fresh"), "return labels"],
        "`transducer_search`'s `predict` makes a [batch, ...] value from no argument (`zeros`)",
        _header_line("    return zeros(batch, hidden), s"),
        "zeros(",
    ),
    (
        "predict_reads_outside",
        [ENC, "h = zeros(batch, hidden)", _search(predict="Closure(h)"), "return labels"],
        "`transducer_search`'s `predict` reads a value from outside it (`h`)",
        _header_line("        return s + self.h, s"),
        "s + self.h",
    ),
    (
        "in_a_loop",
        [ENC, "for e in enc:", "    " + _search(), "return labels"],
        "`transducer_search` runs a whole search: call it outside loops",
        3,
        "transducer_search(",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, case):
    check_located_case(tmp_path, HEADER, SIG, case, target="torch")


def test_returnn_refuses_transducer_search(tmp_path):
    case = (
        "returnn",
        [ENC, _search(), "return labels"],
        "RETURNN target: `transducer_search` has no RETURNN equivalent",
        2,
        "transducer_search(",
    )
    check_located_case(tmp_path, HEADER, SIG, case, target="returnn")


MODELS = ROOT / "tests" / "models"


@pytest.mark.parametrize("fmt", ["torchscript", "onnx", "torch-export"])
def test_export_refuses_transducer_search(tmp_path, fmt):
    """Its search is Python: no exporter captures it; a located error, not a crash."""
    proc = run_netc("export", str(MODELS / "transducer_search.py"), "--format", fmt, "-o", str(tmp_path / "m"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(str(MODELS / "transducer_search.py") + ":58:22: error: --format "), proc.stderr
    assert "`transducer_search` runs its search in Python" in proc.stderr


def test_preview_is_returnns_refusal(tmp_path):
    proc = run_netc("preview", str(MODELS / "transducer_search.py"), "-o", str(tmp_path / "p.html"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert ":58:22: error: RETURNN target: `transducer_search` has no RETURNN equivalent" in proc.stderr


def test_verify_stops_at_returnns_refusal_or_compares_eager_and_torch_without_it():
    path = str(MODELS / "transducer_search.py")
    proc = run_netc("verify", path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert ":58:22: error: RETURNN target: `transducer_search`" in proc.stderr
    proc = run_netc("verify", path, "--no-returnn", "--seed", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split()[:4] for line in proc.stdout.splitlines() if " vs " in line]
    assert rows == [["labels", "eager", "vs", "torch"], ["scores", "eager", "vs", "torch"]], proc.stdout
    assert proc.stdout.rstrip().endswith("verify: ok")
