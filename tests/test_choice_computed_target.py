"""A `choice` target computed in the network (docs/language.md, "A target computed in the
network"): the latent-attention configs' linear alignment, trained on in every backend and
absent from a search; the located errors of what cannot be a target."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch
from conftest import ROOT

from netc.compiler import compile_graph
from netc_runtime.backends import _import_file, load_torch_module

MODEL = ROOT / "tests" / "models" / "hard_attention_linear.py"


def _linear_alignment(enc_lens: list[int], dec_lens: list[int]) -> list[list[int]]:
    """RETURNN's `t_linear`, written out: step i of N over T frames is round((i + 1) * max(T - 1, 0) /
    max(N, 1)) (half to even, as TensorFlow's `tf.round`), at most T - 1."""
    out = []
    for t, n in zip(enc_lens, dec_lens):
        factor = np.float32(max(t - 1, 0)) / np.float32(max(n, 1))
        out.append([min(int(np.round(np.float32(i + 1) * factor)), t - 1) for i in range(n)])
    return out


def test_training_takes_the_computed_positions():
    """Eager mode and the torch module train on the alignment computed from the lengths; a search
    takes no target and chooses positions of its own within each sequence's frames."""
    enc_lens, dec_lens = [9, 5, 2], [4, 5, 3]  # 5 frames for 5 labels; a position past T - 1 clipped
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((3, 9, 6)), dtype=torch.float32)
    y = torch.tensor(rng.integers(1, 7, (3, 5)))
    net = _import_file(str(MODEL), "computed_target").hard_attention_linear
    mod = load_torch_module(compile_graph(str(MODEL)))
    model = mod.Model()
    model.load_returnn_params({k: v.numpy() for k, v in net.params.items()})
    kw = {"enc_time_lens": torch.tensor(enc_lens), "dec_time_lens": torch.tensor(dec_lens)}
    expected = _linear_alignment(enc_lens, dec_lens)
    assert expected[1] == [1, 2, 2, 3, 4] and expected[2] == [0, 1, 1]  # 2.5 rounds to 2, clipped at T - 1
    for res in (net(x, y, **kw), model(x, y, **kw)):
        got = res["positions"]
        assert [got[b, :n].tolist() for b, n in enumerate(dec_lens)] == expected
    searched = model(x, search=True, enc_time_lens=torch.tensor(enc_lens))
    lens = searched["dec_time_lens"]
    for b, t in enumerate(enc_lens):
        chosen = searched["positions"][b, : lens[b]]
        assert lens[b] > 0 and bool(((chosen >= 0) & (chosen < t)).all())


HEADER = """\
from netc import Dim, Labels, Linear, Tensor, batch, cast, choice, end, network, range_over, reduce_sum, searching, zeros, tanh
enc = Dim("enc")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
"""


def _compile(tmp_path, netc, body: str):
    f = tmp_path / "m.py"
    f.write_text(HEADER + textwrap.dedent(body))
    return netc("compile", f, "--target", "torch", "-o", tmp_path / "out.py")


def test_target_computed_in_the_loop_is_a_located_error(tmp_path, netc):
    proc = _compile(
        tmp_path,
        netc,
        """
        @network
        def f(x: Tensor[batch, enc, feat], y: Labels[batch, dec, vocab]):
            s = zeros(batch, feat)
            out = []
            for _ in range(x.max_seq_len):
                t = cast(range_over(dec) * 0 + 1, "int32", class_dim=vocab)
                label = choice(Linear(vocab)(s), target=t, beam=2)
                out.append(label)
                if end(label == 0):
                    break
            return out
        """,
    )
    assert proc.returncode == 1
    assert "m.py:13:17: error: the target of `choice` is computed inside its loop" in proc.stderr
    assert "Traceback" not in proc.stderr and "^" in proc.stderr


def test_target_that_is_not_labels_is_a_located_error(tmp_path, netc):
    proc = _compile(
        tmp_path,
        netc,
        """
        @network
        def f(x: Tensor[batch, enc, feat], y: Labels[batch, dec, vocab]):
            t = cast(range_over(dec), "int32")
            s = zeros(batch, feat)
            out = []
            for _ in range(x.max_seq_len):
                label = choice(Linear(vocab)(s), target=t, beam=2)
                out.append(label)
                if end(label == 0):
                    break
            return out
        """,
    )
    assert proc.returncode == 1
    assert "m.py:13:17: error: the target of `choice` must be labels" in proc.stderr
    assert "Traceback" not in proc.stderr


STEP_READS = [
    (  # a search makes its own steps: no target frame to read
        """
        @network
        def f(x: Tensor[batch, enc, feat], y: Labels[batch, dec, vocab]):
            s = zeros(batch, feat)
            out = []
            for i in range(x.max_seq_len):
                s = s + cast(y[i], "float32")
                label = choice(Linear(vocab)(s), target=y, beam=2)
                out.append(label)
                if end(label == 0):
                    break
            return out
        """,
        "m.py:12:17: error: `x[i]` by the step reads the frame of a sequence training runs over, which a search "
        "does not have",
    ),
    (  # training's steps are the target's frames only in a loop with `choice`
        """
        @network
        def f(x: Tensor[batch, enc, feat], y: Labels[batch, dec, vocab]):
            s = zeros(batch, feat)
            out = []
            for i in range(x.max_seq_len):
                s = s + cast(y[i], "float32")
                out.append(s)
                if end(reduce_sum(s, axis=feat) > 1.0):
                    break
            return out
        """,
        "only a loop with `choice` runs over a target's frames in training",
    ),
    (  # a sequence over another dim than the loop's target's
        """
        @network
        def f(x: Tensor[batch, enc, feat], y: Labels[batch, dec, vocab]):
            s = zeros(batch, feat)
            out = []
            for i in range(x.max_seq_len):
                if searching():
                    s = s * 1.0
                else:
                    s = s + x[i]
                label = choice(Linear(vocab)(s), target=y, beam=2)
                out.append(label)
                if end(label == 0):
                    break
            return out
        """,
        "m.py:15:21: error: `x[i]` reads a sequence over `enc`; this loop's training runs over `dec`",
    ),
]


@pytest.mark.parametrize(("body", "message"), STEP_READS)
def test_step_reads_are_training_only(tmp_path, netc, body, message):
    """`x[i]` by the step of a choice loop (tests/models/target_frame_in_loop.py): the target's
    frame in training, refused where a search would read it or no target's frames are the steps."""
    proc = _compile(tmp_path, netc, body)
    assert proc.returncode == 1, proc.stdout
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "^" in proc.stderr


TWO_CHOICES = """
@network
def f(x: Tensor[batch, enc, feat], y: Labels[batch, dec, vocab], p: Labels[batch, dec, vocab]):
    s = zeros(batch, feat)
    out = []
    for i in range(x.max_seq_len):
        if searching():
            s = s * 1.0
        else:
            s = s + cast(y[i], "float32")
        where = choice(Linear(vocab)(s), target=FIRST, beam=2)
        label = choice(Linear(vocab)(s), target=y, beam=2)
        out.append(label)
        if end(label == 0):
            break
    return out
"""


def test_a_step_read_of_a_later_choices_target_is_no_choice_of_it(tmp_path, netc):
    """`y[i]` before the step's second choice takes `y` (generator seed 428); two choices of `y`
    stay a located error."""
    assert _compile(tmp_path, netc, TWO_CHOICES.replace("FIRST", "p")).returncode == 0
    proc = _compile(tmp_path, netc, TWO_CHOICES.replace("FIRST", "y"))
    assert proc.returncode == 1
    assert "m.py:17:17: error: two choices of one loop take the same target" in proc.stderr, proc.stderr


def test_a_step_read_selected_by_where_on_searching(tmp_path, verify):
    """`where(searching(), t, minimum(t, align[i]))` instead of the `if`: each network keeps the
    operand it selects, eager mode too (a search has no `align`, whose frame it never reads)."""
    src = (ROOT / "tests" / "models" / "target_frame_in_loop.py").read_text()
    branches = """        if searching():
            start = t
        else:
            start = minimum(t, align[i])"""
    assert branches in src
    src = src.replace(branches, "        start = select(searching(), t, minimum(t, align[i]))")
    model = tmp_path / "m.py"
    model.write_text(src.replace("    searching,\n", "    searching,\n    where as select,\n"))
    for flags in ((), ("--search",)):
        proc = verify(model, "--seed", "2", *flags)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.rstrip().endswith("verify: ok") and "eager vs returnn" in proc.stdout
