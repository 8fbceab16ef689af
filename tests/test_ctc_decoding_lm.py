"""CTC prefix search with a neural LM (`ctc_prefix_search(..., lm=step, lm_state=, bos=)`): the
function eager mode and the torch module run (netc.ops.ctc_search.ctc_prefix_beam_search_lm)
against the plain-Python reference of tests/ctc_reference.py given the same LM as a function of
the prefix; the reference against an exhaustive search; the targets through `netc verify
--no-returnn` on tests/models/ctc_decoding_lm.py, RETURNN's and the exporters' located refusals."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT, run_netc
from ctc_reference import exhaustive, log_softmax, prefix_beam_search

from netc.compiler import compile_graph
from netc.ops.ctc_search import ctc_prefix_beam_search, ctc_prefix_beam_search_lm
from netc_runtime.backends import run_backend
from netc_runtime.verify import random_inputs, random_params

MODEL = ROOT / "tests" / "models" / "ctc_decoding_lm.py"


class RnnLm:
    """A tanh RNN LM: h' = tanh(E[label] + h W), log p(next) = log_softmax(h' U + b); as plain
    Python (`next_log_probs` of a prefix, fed from `bos`) and as a torch step function."""

    def __init__(self, rng: random.Random, vocab: int, hidden: int, scale: float = 1.5):
        self.vocab, self.hidden = vocab, hidden

        def m(rows: int, cols: int) -> list[list[float]]:
            return [[rng.gauss(0.0, scale) for _ in range(cols)] for _ in range(rows)]

        self.E, self.W, self.U, self.b = m(vocab, hidden), m(hidden, hidden), m(hidden, vocab), m(1, vocab)[0]
        self.calls = 0

    def _step(self, label: int, h: list[float]) -> list[float]:
        return [
            math.tanh(self.E[label][j] + sum(h[i] * self.W[i][j] for i in range(self.hidden)))
            for j in range(self.hidden)
        ]

    def next_log_probs(self, bos: int):
        memo: dict[tuple[int, ...], list[float]] = {}

        def state(prefix: tuple[int, ...]) -> list[float]:
            if prefix not in memo:
                memo[prefix] = (
                    self._step(prefix[-1], state(prefix[:-1])) if prefix else self._step(bos, [0.0] * self.hidden)
                )
            return memo[prefix]

        def next_lm(prefix: tuple[int, ...]) -> list[float]:
            h = state(prefix)
            return log_softmax(
                [sum(h[j] * self.U[j][v] for j in range(self.hidden)) + self.b[v] for v in range(self.vocab)]
            )

        return next_lm

    def torch_step(self, labels: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls += labels.shape[0]
        E, W, U, b = (torch.tensor(t, dtype=torch.float64) for t in (self.E, self.W, self.U, self.b))
        h = torch.tanh(E[labels] + h @ W)
        return torch.log_softmax(h @ U + b, dim=-1), h


def _case(rng: random.Random, frames: int, classes: int, scale: float = 2.0) -> list[list[float]]:
    rows = [[rng.gauss(0.0, scale) for _ in range(classes)] for _ in range(frames)]
    return torch.tensor(rows, dtype=torch.float32).reshape(frames, classes).double().tolist()


def _search_lm(logits, beam, lm: RnnLm, bos: int, weight: float, classes: int):
    x = torch.tensor(logits, dtype=torch.float64).reshape(1, len(logits), classes)
    state = (torch.zeros(1, lm.hidden, dtype=torch.float64),)
    labels, lens, score = ctc_prefix_beam_search_lm(
        x, torch.tensor([len(logits)]), beam, lm.torch_step, state, bos, weight
    )
    return labels[0, : lens[0]].tolist(), float(score[0])


def test_reference_with_an_lm_function_without_pruning_is_exhaustive():
    rng = random.Random(10)
    for _ in range(40):
        classes = rng.randint(2, 4)
        lm = RnnLm(rng, classes - 1, 3)
        logits = _case(rng, rng.randint(1, 5), classes)
        next_lm, weight = lm.next_log_probs(rng.randrange(classes - 1)), rng.uniform(0.3, 2.0)
        probs = exhaustive(logits, next_lm, weight)
        best = max(probs, key=probs.__getitem__)
        labels, score = prefix_beam_search(logits, 10**6, next_lm, weight)
        assert labels == list(best) and score == pytest.approx(probs[best], abs=1e-9)


def test_prefix_search_with_an_lm_is_the_reference():
    """Same labels and scores on random cases (beams 1..6, 2..4 classes); the LM changes the best
    prefix (against the search without it) in many of them."""
    rng = random.Random(11)
    changed = 0
    for _ in range(150):
        classes, beam = rng.randint(2, 4), rng.randint(1, 6)
        lm = RnnLm(rng, classes - 1, rng.randint(1, 4))
        logits = _case(rng, rng.randint(0, 7), classes)
        bos, weight = rng.randrange(classes - 1), rng.uniform(0.3, 2.0)
        labels, score = _search_lm(logits, beam, lm, bos, weight, classes)
        ref_labels, ref_score = prefix_beam_search(logits, beam, lm.next_log_probs(bos), weight)
        assert labels == ref_labels and score == pytest.approx(ref_score, abs=1e-9)
        changed += labels != prefix_beam_search(logits, beam)[0]
    assert changed >= 20, changed


def test_the_lm_decides_between_two_prefixes():
    """Frames as likely to be label 0 as label 1: without an LM the first (0) wins the tie; an LM
    that prefers 1 after BOS makes it [1], as the reference does."""
    logits = [[2.0, 2.0, 0.0]]
    assert prefix_beam_search(logits, 2)[0] == [0]
    rng = random.Random(12)
    found = set()
    for _ in range(50):
        lm = RnnLm(rng, 2, 2)
        first = lm.next_log_probs(0)(())
        labels, score = _search_lm(logits, 2, lm, 0, 1.0, 3)
        assert labels == ([1] if first[1] > first[0] else [0])
        ref_labels, ref_score = prefix_beam_search(logits, 2, lm.next_log_probs(0), 1.0)
        assert labels == ref_labels and score == pytest.approx(ref_score, abs=1e-9)
        found.add(tuple(labels))
    assert found == {(0,), (1,)}


def test_a_bigram_lm_function_is_the_bigram_table():
    """A step function reading a bigram table decodes as the table does (padded batch): its state
    a flag, set before BOS, that reads the table's start row."""
    rng = random.Random(13)
    for _ in range(60):
        classes, beam = rng.randint(2, 4), rng.randint(1, 5)
        vocab = classes - 1
        table = torch.tensor(
            [[rng.gauss(0.0, 1.0) for _ in range(vocab)] for _ in range(vocab + 1)], dtype=torch.float64
        )
        x = torch.tensor([_case(rng, 6, classes) for _ in range(3)], dtype=torch.float64)
        lens = torch.tensor([6, 2, 0])

        def step(labels: torch.Tensor, start: torch.Tensor, table=table, vocab=vocab) -> tuple[torch.Tensor, ...]:
            return torch.where(start > 0, table[vocab], table[labels]), torch.zeros_like(start)

        weight = rng.uniform(0.3, 1.5)
        ref = ctc_prefix_beam_search(x, lens, beam, table[None].expand(3, -1, -1), weight)
        got = ctc_prefix_beam_search_lm(x, lens, beam, step, (torch.ones(3, 1),), rng.randrange(vocab), weight)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
        assert torch.allclose(got[2], ref[2], atol=1e-12, rtol=0)


def test_padded_batch_is_each_sequence():
    """Padded frames of shorter sequences change nothing; the LM runs only on new prefixes."""
    rng = random.Random(14)
    lm = RnnLm(rng, 3, 3)
    lens = [7, 0, 3, 5, 1]
    x = torch.tensor([_case(rng, 7, 4) for _ in lens], dtype=torch.float32)
    state = (torch.zeros(len(lens), 3, dtype=torch.float64),)
    labels, out_lens, scores = ctc_prefix_beam_search_lm(x, torch.tensor(lens), 3, lm.torch_step, state, 1, 0.8)
    for b, n in enumerate(lens):
        seq = x[b, :n].double().tolist()
        ref_labels, ref_score = prefix_beam_search(seq, 3, lm.next_log_probs(1), 0.8)
        assert labels[b, : out_lens[b]].tolist() == ref_labels
        assert float(scores[b]) == pytest.approx(ref_score, abs=1e-9)
        assert (labels[b, out_lens[b] :] == 0).all()
    assert lm.calls <= len(lens) * (1 + 3 * max(lens))  # BOS, then at most a beam of new prefixes a frame


def test_verify_compares_eager_and_torch_returnn_refuses_located():
    """`netc verify --no-returnn` compares eager and torch; compile and verify for RETURNN stop at its refusal."""
    proc = run_netc("verify", str(MODEL), "--no-returnn", "--seed", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split()[:4] for line in proc.stdout.splitlines() if " vs " in line]
    names = ["labels", "score", "lm_labels", "lm_score", "fn_labels", "fn_score", "fl_labels", "fl_score"]
    assert rows == [[n, "eager", "vs", "torch"] for n in names], proc.stdout
    src = MODEL.read_text().splitlines()
    line = next(i for i, text in enumerate(src, 1) if "lm_labels, lm_score = ctc_prefix_search(" in text)
    proc = run_netc("compile", str(MODEL), "--target", "returnn", "-o", "/dev/null")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"ctc_decoding_lm.py:{line}:" in proc.stderr
    assert "error: RETURNN target: `ctc_prefix_search` with an LM function has no RETURNN equivalent" in proc.stderr
    proc = run_netc("verify", str(MODEL))  # with RETURNN: its refusal, located
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"ctc_decoding_lm.py:{line}:27: error: RETURNN target: `ctc_prefix_search`" in proc.stderr


@pytest.mark.parametrize("fmt", ["torchscript", "onnx", "torch-export"])
def test_export_refuses_located(tmp_path, fmt):
    proc = run_netc("export", str(MODEL), "--format", fmt, "-o", str(tmp_path / "m"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = next(i for i, t in enumerate(MODEL.read_text().splitlines(), 1) if "lm_labels, lm_score =" in t)
    assert f"ctc_decoding_lm.py:{line}:" in proc.stderr
    assert (
        f"error: --format {fmt}: `ctc_prefix_search` calls its functions (`lm`) from a search in Python" in proc.stderr
    )


def _label_lm(params: dict, bos: int):
    """examples/conformer_ctc.py's `LabelLm` in numpy (float64) from its parameters, as a function
    of the prefix: the LSTM cell is RETURNN's LSTMBlock (gates i, j, f, o; forget bias 1)."""
    emb, kernel, bias = (
        params[f"lm/{k}"].astype(np.float64) for k in ("embed/W", "lstm/lstm_cell/kernel", "lstm/lstm_cell/bias")
    )
    out_w, out_b = params["lm/out/W"].astype(np.float64), params["lm/out/b"].astype(np.float64)
    hidden = out_w.shape[0]
    memo: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def sigmoid(v):
        return 1.0 / (1.0 + np.exp(-v))

    def state(prefix: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        if prefix not in memo:
            label, (h, c) = (prefix[-1], state(prefix[:-1])) if prefix else (bos, (np.zeros(hidden), np.zeros(hidden)))
            i, j, f, o = np.split(np.concatenate([emb[label], h]) @ kernel + bias, 4)
            c = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j)
            memo[prefix] = (sigmoid(o) * np.tanh(c), c)
        return memo[prefix]

    def next_lm(prefix: tuple[int, ...]) -> list[float]:
        return log_softmax((state(prefix)[0] @ out_w + out_b).tolist())

    return next_lm


def test_conformer_example_with_an_lm_decodes_as_the_reference():
    """examples/conformer_ctc.py's `conformer_ctc_decode_lm`, with a training network's parameters
    and its LM's, on eager and torch: the labels and score the reference finds from its log
    probabilities and the LM; the LM changes the best prefix somewhere; eager and torch agree."""
    example = EXAMPLES / "conformer_ctc.py"
    train = compile_graph(str(example), network="conformer_ctc")
    g = compile_graph(str(example), network="conformer_ctc_decode_lm")
    train_params = {p.name: p.dims for p in train.params}
    assert {p.name: p.dims for p in g.params if not p.name.startswith("lm/")} == train_params
    rng = np.random.default_rng(8)
    params = random_params(g, rng)
    params["logits/W"] *= 0.5  # flatter frames: the LM has a say
    lens = {"time": np.array([40, 23, 31, 9])}
    x = {"x": random_inputs(g, lens, rng)["x"]}
    frames = [(n + 1) // 2 for n in lens["time"]]
    next_lm = _label_lm(params, bos=0)
    differs = False
    results = {}
    for backend in ("eager", "torch"):
        res = results[backend] = run_backend(backend, str(example), x, lens, params, g)
        for b, n in enumerate(frames):
            logp = res.outputs["output"][b, :n].astype(np.float64).tolist()
            labels, score = prefix_beam_search(logp, 4, next_lm, 0.5)
            n_labels = res.lens["labels"]["lm_time"][b]
            assert res.outputs["labels"][b, :n_labels].tolist() == labels, backend
            assert abs(float(res.outputs["score"][b]) - score) <= 1e-4, backend
            differs |= labels != prefix_beam_search(logp, 4)[0]
    assert differs
    eager, torch_ = results["eager"], results["torch"]  # eager is torch: the same labels, scores <= 1e-5
    assert np.array_equal(eager.lens["labels"]["lm_time"], torch_.lens["labels"]["lm_time"])
    for b, n in enumerate(eager.lens["labels"]["lm_time"]):
        assert eager.outputs["labels"][b, :n].tolist() == torch_.outputs["labels"][b, :n].tolist()
    assert np.abs(eager.outputs["score"] - torch_.outputs["score"]).max() <= 1e-5


def test_searches_with_an_lm_after_a_beam_search_take_its_hypotheses_rows():
    """After a decoder's beam search, eager mode's values of its last step have a row per
    hypothesis; a CTC prefix search's (and a transducer search's) LM state made after the loop has
    the batch's one: both get the hypotheses' rows (a traceback of tests/diffgen seed 7034)."""
    model = ROOT / "tests" / "models" / "lm_searches_after_a_choice_loop.py"
    for flags in ([], ["--search"]):
        proc = run_netc("verify", str(model), "--no-returnn", *flags)
        assert proc.returncode == 0 and proc.stdout.rstrip().endswith("verify: ok"), proc.stdout + proc.stderr
        compared = {line.split()[0] for line in proc.stdout.splitlines() if " eager vs torch " in line}
        want = {"labels", "scores"} if flags else {"labels", "ctc_labels", "ctc_score", "rnnt_labels", "rnnt_score"}
        assert compared == want, proc.stdout
