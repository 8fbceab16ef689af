"""`choice`: one source for training (teacher forcing) and beam search, on all three backends.

The searches are compared with parameters that make the end label likely to different
degrees, so hypotheses end at different steps (length normalisation, ended hypotheses kept in
the beam) and sequences of one batch stop at different lengths.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT, run_netc, verify_in_process

from netc.compiler import compile_graph
from netc_runtime.backends import _import_file, load_torch_module, run_backend
from netc_runtime.verify import TOLERANCE, compare, random_inputs, random_lengths, random_params

MODEL = EXAMPLES / "beam_search.py"


def _batch(g, seed: int, eos_bias: float):
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, 4, 6, rng)
    inputs = random_inputs(g, lens, rng)
    params = random_params(g, rng)
    (bias,) = [k for k in params if k.endswith("scores/b")]
    params[bias][0] += eos_bias  # label 0 ends a hypothesis
    return inputs, lens, params


@pytest.mark.parametrize("seed,eos_bias", [(0, -3.0), (0, 0.0), (3, 0.3), (4, 0.5), (1, 1.5)])
def test_search_agrees_on_all_backends(seed, eos_bias):
    g = compile_graph(str(MODEL))
    inputs, lens, params = _batch(g, seed, eos_bias)
    res = {b: run_backend(b, str(MODEL), inputs, lens, params, g, search=True) for b in ("eager", "torch", "returnn")}
    for backend in ("torch", "returnn"):
        for c in compare(g, res["eager"], res[backend], backend):
            assert c.max_abs_diff <= TOLERANCE, c
    found = res["eager"].lens["output"]["dec_time"]
    assert set(res["eager"].dims) == {"output", "logits", "scores"}
    assert np.all(found >= 1) and np.all(found <= 2 * lens["enc_time"])
    if eos_bias == -3.0:  # no end label found: every sequence ran to its bound, twice its input length
        assert np.array_equal(found, 2 * lens["enc_time"])
    if eos_bias == 0.0:  # some end on the end label, some at their bound
        assert (found < 2 * lens["enc_time"]).any() and (found == 2 * lens["enc_time"]).any()


def test_training_is_teacher_forcing_on_all_backends():
    g = compile_graph(str(MODEL))
    inputs, lens, params = _batch(g, 2, 0.0)
    res = {b: run_backend(b, str(MODEL), inputs, lens, params, g) for b in ("eager", "torch", "returnn")}
    for backend in ("torch", "returnn"):
        for c in compare(g, res["eager"], res[backend], backend):
            assert c.max_abs_diff <= TOLERANCE, c
    # the loop ran over the target's frames and chose the reference labels, whatever the end label says
    assert np.array_equal(res["eager"].lens["output"]["dec_time"], lens["dec_time"])
    for b, n in enumerate(lens["dec_time"]):
        assert np.array_equal(res["torch"].outputs["output"][b, :n], inputs["y"][b, :n])


def test_search_is_the_best_hypothesis():
    """A brute-force check of the search on one sequence: with beam 4 and short sequences, the
    best hypothesis scores at least as well as every hypothesis of the greedy search."""
    g = compile_graph(str(MODEL))
    inputs, lens, params = _batch(g, 4, 0.5)
    model = load_torch_module(g).Model()
    model.load_returnn_params(params)
    x, xl = torch.as_tensor(inputs["x"]), torch.as_tensor(lens["enc_time"])
    with torch.no_grad():
        out = model(x=x, enc_time_lens=xl, search=True)
        labels, n = out["output"], out["dec_time_lens"]
        # score the found labels by teacher forcing: the sum of log-probs per label
        tf = model(x, labels, xl, n)
        logp = torch.log_softmax(tf["logits"], dim=-1).gather(2, labels[:, :, None])[..., 0]
        mask = torch.arange(labels.shape[1])[None, :] < n[:, None]
        per_step = (logp * mask).sum(dim=1) / n
    torch.testing.assert_close(per_step, out["scores"], atol=1e-5, rtol=1e-5)


def test_module_and_eager_search_interface():
    g = compile_graph(str(MODEL))
    inputs, lens, params = _batch(g, 3, 0.3)
    model = load_torch_module(g).Model()
    assert model.search_outputs == ["output", "logits"]
    x, xl = torch.as_tensor(inputs["x"]), torch.as_tensor(lens["enc_time"])
    with torch.no_grad():
        a = model(x=x, enc_time_lens=xl, search=True)
        b = model.search(x, xl)
    assert set(a) == {"output", "logits", "dec_time_lens", "scores"}
    assert torch.equal(a["output"], b["output"])
    with pytest.raises(TypeError, match="training needs y, enc_time_lens, dec_time_lens"):
        model(x=x, enc_time_lens=xl)
    net = _import_file(str(MODEL), "beam_eager").beam_search
    net.load_returnn_params({k: v for k, v in params.items()})
    e = net(x=x, enc_time_lens=xl, search=True)
    assert set(e) == set(a)


def test_run_search_through_the_cli(tmp_path):
    g = compile_graph(str(MODEL))
    inputs, lens, params = _batch(g, 4, 0.5)
    np.savez(tmp_path / "in.npz", **{"in:x": inputs["x"], "len:enc_time": lens["enc_time"]})  # no target
    np.savez(tmp_path / "p.npz", **{f"param:{k}": v for k, v in params.items()})
    outs = {}
    for backend in ("eager", "torch", "returnn"):
        out = tmp_path / f"{backend}.npz"
        run_netc(
            "run", MODEL, "--backend", backend, "--search", "--inputs", tmp_path / "in.npz",
            "--params", tmp_path / "p.npz", "-o", out, check=True,
        )  # fmt: skip
        outs[backend] = np.load(out)
    ref = outs["eager"]
    assert set(ref.files) >= {"out:output", "outlen:output:dec_time", "out:scores"}
    for backend in ("torch", "returnn"):
        o = outs[backend]
        assert np.array_equal(o["outlen:output:dec_time"], ref["outlen:output:dec_time"])
        for b, n in enumerate(ref["outlen:output:dec_time"]):
            assert np.array_equal(o["out:output"][b, :n], ref["out:output"][b, :n])
        np.testing.assert_allclose(o["out:scores"], ref["out:scores"], atol=1e-5)


def _gru_cell_decoder(directory: Path) -> Path:
    """The example with its decoder state a `GruCell` (RETURNN: the cell's subnetwork runs on
    every hypothesis of the beam)."""
    text = MODEL.read_text(encoding="utf-8")
    step = "s = tanh(Linear(hidden)(concat(Embedding(emb)(label), context)) + Linear(hidden, with_bias=False)(s))"
    assert step in text and "    Embedding,\n" in text
    text = text.replace(step, "s = GruCell(hidden)(concat(Embedding(emb)(label), context), s)")
    path = directory / "gru_cell_decoder.py"
    path.write_text(text.replace("    Embedding,\n", "    Embedding,\n    GruCell,\n"), encoding="utf-8")
    return path


@pytest.mark.parametrize("decoder", ["as written", "GruCell state"])
def test_verify_search_through_the_cli(tmp_path, decoder):
    model = MODEL if decoder == "as written" else _gru_cell_decoder(tmp_path)
    proc = run_netc("verify", model, "--search", "--seed", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scores           eager vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")


@pytest.mark.parametrize("model", ["search_aux_ctc.py", "choice_no_loss.py"])
@pytest.mark.parametrize("search", [False, True])
def test_verify_decoders_whose_networks_use_some_parameters(model, search):
    """Parameters only one mode computes with: the auxiliary CTC's `Linear` (not in a search); a
    decoder without a loss whose training returns only the target (no parameter in training)."""
    proc = verify_in_process(ROOT / "tests" / "models" / model, "--seed", "2", *(["--search"] if search else []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "output           eager vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")
    assert ("scores           eager vs returnn" in proc.stdout) == search


def test_verify_search_of_a_dim_only_the_search_network_has():
    """A `concat` of the decoder's state and an invariant over a made dim, which the search's passes
    split: the part's dim (`feat + hid`) exists only in the search network (the RETURNN emitter's
    KeyError before)."""
    proc = verify_in_process(ROOT / "tests" / "models" / "search_concat_made_dim.py", "--search")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scores           eager vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")


def test_run_search_with_an_auxiliary_loss_through_the_cli(tmp_path):
    """`netc run --search` with every parameter of the model given, the CTC's included."""
    model = ROOT / "tests" / "models" / "search_aux_ctc.py"
    g = compile_graph(str(model))
    rng = np.random.default_rng(1)
    lens = random_lengths(g, 3, 5, rng)
    inputs = random_inputs(g, lens, rng)
    params = random_params(g, rng)
    assert "linear/W" in params  # the CTC's projection
    np.savez(tmp_path / "in.npz", **{"in:x": inputs["x"], "len:enc_time": lens["enc_time"]})
    np.savez(tmp_path / "p.npz", **{f"param:{k}": v for k, v in params.items()})
    outs = {}
    for backend in ("eager", "returnn"):
        out = tmp_path / f"{backend}.npz"
        run_netc(
            "run", model, "--backend", backend, "--search", "--inputs", tmp_path / "in.npz",
            "--params", tmp_path / "p.npz", "-o", out, check=True,
        )  # fmt: skip
        outs[backend] = np.load(out)
    assert np.array_equal(outs["returnn"]["outlen:output:dec_time"], outs["eager"]["outlen:output:dec_time"])
    np.testing.assert_allclose(outs["returnn"]["out:scores"], outs["eager"]["out:scores"], atol=1e-5)


def test_search_stacking_the_label_a_step_starts_from():
    """`labels.append(label)` before `label = choice(...)`: a state read after the choice; the torch
    search once re-selected it under a new name and never updated the loop's own (all zeros)."""
    proc = verify_in_process(ROOT / "tests" / "fuzz_cases" / "choice_stacks_previous_label.py", "--search")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "output           eager vs torch    max|Δ| = 0.000e+00" in proc.stdout
    assert proc.stdout.rstrip().endswith("verify: ok")


def test_search_expanding_a_state():
    """`expand` of a state in the search loop: the expanded rows are the beam's hypotheses."""
    proc = verify_in_process(ROOT / "tests" / "models" / "search_expand.py", "--search", "--seed", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scores           eager vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")


def test_search_without_choice_is_an_error():
    proc = run_netc("verify", EXAMPLES / "elman.py", "--search")
    assert proc.returncode == 1 and "has no `choice`" in proc.stderr and "Traceback" not in proc.stderr


HEADER = """\
from netc import Dim, Labels, Linear, Tensor, batch, choice, end, network, zeros, argmax, Embedding, tanh
time = Dim("time")
dec = Dim("dec")
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 4)
"""


@pytest.mark.parametrize(
    "name,body,message,line",
    [
        (
            "no_loop",
            """
            @network
            def f(x: Tensor[batch, time, vocab], y: Labels[batch, dec, vocab]):
                return choice(Linear(vocab)(zeros(batch, hidden)), target=y, beam=2)
            """,
            "`choice` belongs in a loop that ends with `if end(cond): break`",
            3,
        ),
        (
            "target_computed_in_the_loop",
            """
            @network
            def f(x: Tensor[batch, time, vocab], y: Labels[batch, dec, vocab]):
                labels = []
                label = argmax(zeros(batch, vocab), axis=vocab)
                for _ in range(x.max_seq_len + 1):
                    label = choice(Linear(vocab)(Embedding(hidden)(label)), target=label, beam=2)
                    labels.append(label)
                    if end(label == 0):
                        break
                return labels
            """,
            "the target of `choice` is computed inside its loop; compute it before the loop",
            6,
        ),
        (
            "appends_after_end",
            """
            @network
            def f(x: Tensor[batch, time, vocab], y: Labels[batch, dec, vocab]):
                labels = []
                label = argmax(zeros(batch, vocab), axis=vocab)
                for _ in range(x.max_seq_len + 1):
                    label = choice(Linear(vocab)(Embedding(hidden)(label)), target=y, beam=2)
                    if end(label == 0):
                        break
                    labels.append(label)
                return labels
            """,
            "append before `if end(...)`",
            7,
        ),
        (
            "bad_beam",
            """
            @network
            def f(x: Tensor[batch, time, vocab], y: Labels[batch, dec, vocab]):
                labels = []
                label = argmax(zeros(batch, vocab), axis=vocab)
                for _ in range(x.max_seq_len + 1):
                    label = choice(Linear(vocab)(Embedding(hidden)(label)), target=y, beam=0)
                    labels.append(label)
                    if end(label == 0):
                        break
                return labels
            """,
            "`beam` must be a positive integer",
            6,
        ),
        (
            "scores_of_another_dim",
            """
            @network
            def f(x: Tensor[batch, time, vocab], y: Labels[batch, dec, vocab]):
                labels = []
                label = argmax(zeros(batch, vocab), axis=vocab)
                for _ in range(x.max_seq_len + 1):
                    label = choice(Embedding(hidden)(label), target=y, beam=2)
                    labels.append(label)
                    if end(label == 0):
                        break
                return labels
            """,
            "choice scores are float [batch, vocab]",
            6,
        ),
        (
            "bad_input_type",
            """
            @network
            def f(x: Tensor[batch, time, vocab], y: Labels[batch, dec, vocab]):
                labels = []
                label = argmax(zeros(batch, vocab), axis=vocab)
                for _ in range(x.max_seq_len + 1):
                    label = choice(Linear(vocab)(Embedding(hidden)(label)), target=y, beam=2, input_type="softmax")
                    labels.append(label)
                    if end(label == 0):
                        break
                return labels
            """,
            "`input_type` is one of 'logits', 'log_prob', 'prob'",
            6,
        ),
        (
            "bad_sample",
            """
            @network
            def f(x: Tensor[batch, time, vocab], y: Labels[batch, dec, vocab]):
                labels = []
                label = argmax(zeros(batch, vocab), axis=vocab)
                for _ in range(x.max_seq_len + 1):
                    label = choice(Linear(vocab)(Embedding(hidden)(label)), target=y, beam=2, sample=1)
                    labels.append(label)
                    if end(label == 0):
                        break
                return labels
            """,
            "`sample` must be True or False",
            6,
        ),
        (
            "bad_seed",
            """
            @network
            def f(x: Tensor[batch, time, vocab], y: Labels[batch, dec, vocab]):
                labels = []
                label = argmax(zeros(batch, vocab), axis=vocab)
                for _ in range(x.max_seq_len + 1):
                    label = choice(Linear(vocab)(Embedding(hidden)(label)), target=y, beam=2, sample=True, seed=-1)
                    labels.append(label)
                    if end(label == 0):
                        break
                return labels
            """,
            "`seed` must be an integer in [0, 2**31)",
            6,
        ),
    ],
)
def test_misuse_is_a_located_error(tmp_path, name, body, message, line):
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    proc = run_netc("compile", path, "--target", "torch")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{path}:{HEADER.count(chr(10)) + line}:"), first
    assert message in first, first


def test_eager_training_needs_a_bound_covering_the_targets(tmp_path):
    """In training a loop with `choice` runs over its target (RETURNN and torch); eager mode runs
    the Python loop, so a bound shorter than the target is an error there, not a silent cut."""
    path = tmp_path / "short.py"
    path.write_text(MODEL.read_text().replace("range(2 * x.max_seq_len)", "range(2)"))
    g = compile_graph(str(path))
    inputs, lens, params = _batch(g, 2, 0.0)
    # `netc verify` draws targets within the bound; a caller may pass longer ones
    lens["dec_time"] = np.maximum(lens["dec_time"], 3)
    inputs = random_inputs(g, lens, np.random.default_rng(2))
    with pytest.raises(ValueError, match="stopped after 2 of its target's"):
        run_backend("eager", str(path), inputs, lens, params, g)
