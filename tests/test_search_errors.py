"""What the RETURNN target cannot search, as located errors of the real CLI (the torch target
compiles the same model)."""

from __future__ import annotations

import textwrap

MODEL = textwrap.dedent(
    """\
    from netc import Dim, Embedding, Labels, Linear, Tensor, argmax, batch, choice, dot, end, network, softmax, tanh, zeros

    time = Dim("time")
    dec = Dim("dec")
    feat = Dim("feat", 4)
    vocab = Dim("vocab", 5)


    @network
    def f(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
        enc = tanh(Linear(feat)(x))
        s = zeros(batch, feat)
        label = argmax(zeros(batch, vocab), axis=vocab)
        labels = []
        for _ in range(x.max_seq_len):
            q = Linear(feat)(s)
            {state}
            for e_t in enc:
                c = tanh(e_t + Linear(feat)(c){invariant})
            att = softmax(dot(enc, c, reduce=feat), axis=time)
            s = tanh(Linear(feat)(dot(att, enc, reduce=time)) + Embedding(feat)(label))
            label = choice(Linear(vocab)(s), target=y, beam=2)
            labels.append(label)
            if end(label == 0):
                break
        return {{"labels": labels}}
    """
)
INNER_FOR_LINE = MODEL.splitlines().index("        for e_t in enc:") + 1


def test_inner_state_from_the_labels_in_a_searched_loop(tmp_path, netc):
    """An inner loop's state computed from the previous label (its initial value, or a value the
    inner step reads): RETURNN's search cannot follow the beam into it."""
    for name, state, invariant in [("init", "c = q", ""), ("invariant", "c = zeros(batch, feat)", " + q")]:
        (tmp_path / f"{name}.py").write_text(MODEL.format(state=state, invariant=invariant), encoding="utf-8")
        proc = netc("compile", f"{name}.py", "--target", "returnn", cwd=tmp_path)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        first, source_line, caret = proc.stderr.splitlines()[:3]
        assert first.startswith(f"{name}.py:{INNER_FOR_LINE}:9: error: RETURNN target: in a loop with `choice`, ")
        assert "an inner loop's state (`c`) cannot be computed from the chosen labels" in first
        assert source_line.strip() == "for e_t in enc:" and caret.strip().startswith("^")
        assert netc("compile", f"{name}.py", "--target", "torch", cwd=tmp_path).returncode == 0


def test_inner_state_not_from_the_labels_is_searched(tmp_path, netc):
    """An inner state that reads no label (hoisted out of the searched loop) is no error."""
    (tmp_path / "m.py").write_text(MODEL.format(state="c = zeros(batch, feat)", invariant=""), encoding="utf-8")
    proc = netc("compile", "m.py", "--target", "returnn", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
