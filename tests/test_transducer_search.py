"""Transducer decoders from the training source, searched on all three backends: the one-label-per-
frame form (RNA-style: a `choice` over vocab + blank per encoder frame, the prediction state advanced
only on a label), greedy (beam 1) and with a beam; a `choice` loop whose end does not read the
labels."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, returnn_variables, verify_in_process

from netc.compiler import compile_graph
from netc.emit_tf.emitter import emit_returnn
from netc_runtime.backends import BACKENDS, load_torch_module, run_backend
from netc_runtime.verify import random_inputs, random_lengths, random_params

MODELS = ROOT / "tests" / "models"
RNA = MODELS / "rna_decoder.py"


def _rna(directory, beam: int):
    text = RNA.read_text(encoding="utf-8")
    assert "\nBEAM = 3\n" in text
    path = directory / f"rna_beam{beam}.py"
    path.write_text(text.replace("\nBEAM = 3\n", f"\nBEAM = {beam}\n"), encoding="utf-8")
    return path


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("search", [False, True])
def test_rna_decoder_verifies(tmp_path, beam, search):
    proc = verify_in_process(_rna(tmp_path, beam), "--seed", "3", *(["--search"] if search else []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "output           eager vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")
    assert ("scores           eager vs returnn" in proc.stdout) == search


def test_rna_search_emits_one_class_per_frame_and_greedy_is_the_best_label(tmp_path):
    """The search's lengths are the frames'; with beam 1 each frame's class is the argmax of the
    scores the search returns for it (the prediction state advanced on the labels chosen before)."""
    path = _rna(tmp_path, 1)
    g = compile_graph(str(path))
    rng = np.random.default_rng(5)
    lens = random_lengths(g, 3, 7, rng)
    inputs = {k: v for k, v in random_inputs(g, lens, rng).items() if k == "x"}
    params = random_params(g, rng)
    params["logits_2/rec/scores/b"][4] += 1.0  # blanks and labels both chosen
    for backend in ("eager", "torch"):
        res = run_backend(backend, str(path), inputs, {"time": lens["time"]}, params, g, search=True)
        assert list(res.lens["output"]["time"]) == list(lens["time"])
        for b, n in enumerate(lens["time"]):
            want = res.outputs["logits"][b, :n].argmax(-1)
            assert res.outputs["output"][b, :n].tolist() == want.tolist()
        chosen = np.concatenate([res.outputs["output"][b, :n] for b, n in enumerate(lens["time"])])
        assert (chosen == 4).any() and (chosen != 4).any()


def test_search_whose_end_does_not_read_the_labels():
    proc = verify_in_process(MODELS / "search_end_of_steps.py", "--search", "--seed", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scores           eager vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")


def _time_sync_reference(x: np.ndarray, n: int, p: dict) -> list[list[int]]:
    """Greedy time-synchronous decoding of one sequence, in numpy: per frame its 3 symbols."""
    enc = np.tanh(x[:n] @ p["enc/W"] + p["enc/b"])

    def prediction(label, s):
        return np.tanh(
            np.concatenate([p["prediction/embed/W"][label], s]) @ p["prediction/step/W"] + p["prediction/step/b"]
        )

    s = prediction(4, np.zeros(6))
    frames = []
    for e in enc:
        more, symbols = True, []
        for _ in range(3):
            h = np.tanh(e @ p["joint/enc/W"] + p["joint/enc/b"] + s @ p["joint/pred/W"])
            best = int(np.argmax(h @ p["joint/out/W"] + p["joint/out/b"]))
            more = more and best != 4
            if more:
                s = prediction(best, s)
            symbols.append(best if more else 4)
        frames.append(symbols)
    return frames


def test_time_synchronous_greedy_decoding_is_the_reference():
    """At most 3 symbols per frame, until the blank: every backend decodes as numpy does, on
    parameters where frames end after 0, 1, 2 and 3 labels."""
    path = MODELS / "transducer_time_sync.py"
    g = compile_graph(str(path))
    rng = np.random.default_rng(4)
    lens = random_lengths(g, 3, 7, rng)
    inputs = random_inputs(g, lens, rng)
    params = random_params(g, rng)
    params["joint/out/b"][4] += 0.8  # blanks and labels both chosen
    want = [_time_sync_reference(inputs["x"][b], n, params) for b, n in enumerate(lens["time"])]
    counts = {sum(s != 4 for s in frame) for seq in want for frame in seq}
    assert counts == {0, 1, 2, 3}, counts
    for backend in BACKENDS:
        res = run_backend(backend, str(path), inputs, lens, params, g)
        for b, n in enumerate(lens["time"]):
            got = np.stack([res.outputs[f"sym{k}"][b, :n] for k in range(3)], axis=1)
            assert got.tolist() == want[b], backend


EXAMPLE = ROOT / "examples" / "conformer_transducer.py"
BLANK = 10  # the example's blank: the last of vocab + blank


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _greedy_reference(enc: np.ndarray, params: dict, max_symbols: int) -> list[list[int]]:
    """Greedy decoding of one sequence's encoder frames with the example's prediction and joint
    networks, in numpy: per frame its `max_symbols` symbols, the blank after its last label (one
    symbol per frame is the one-label-per-frame form)."""
    p = {k.removeprefix("logits/rec/"): v for k, v in params.items()}

    def prediction(label: int, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = p["prediction/embedding/W"][label]
        z = (
            x @ p["prediction/lstm/ff_linear/W"]
            + p["prediction/lstm/ff_linear/b"]
            + h @ p["prediction/lstm/rec_linear/W"]
        )
        x_in, g_in, g_forget, g_out = np.split(z, 4)
        c = c * _sigmoid(g_forget) + np.tanh(x_in) * _sigmoid(g_in)
        return np.tanh(c) * _sigmoid(g_out), c

    h, c, last, frames = np.zeros(16), np.zeros(16), 0, []
    for e in enc:
        symbols, more = [], True
        for _ in range(max_symbols):
            h_next, c_next = prediction(last, h, c)
            joint = np.tanh(e @ p["joint/enc_proj/W"] + p["joint/enc_proj/b"] + h_next @ p["joint/pred_proj/W"])
            best = int(np.argmax(joint @ p["joint/out/W"] + p["joint/out/b"]))
            more = more and best != BLANK
            if more:
                h, c, last = h_next, c_next, best
            symbols.append(best if more else BLANK)
        frames.append(symbols)
    return frames


def test_conformer_transducer_decodes_its_training_networks_parameters(tmp_path):
    """examples/conformer_transducer.py: its decoders have the training network's parameters
    (RETURNN's TF variables: names and shapes; torch's names), so a checkpoint of training decodes.
    On such parameters every backend decodes as numpy does from the training network's encoder:
    time-synchronously with up to 3 symbols per frame (frames of 0, 1, 2 and 3 labels) and one
    label per frame, greedy (beam 1); with a beam of 4, eager, torch and RETURNN find the same best
    hypothesis with the same score, better than greedy's."""
    text = EXAMPLE.read_text(encoding="utf-8")
    assert "\nBEAM = 4  #" in text
    train = compile_graph(str(EXAMPLE), network="conformer_transducer")
    trained, _, _ = returnn_variables(emit_returnn(train), train=True)
    torch_names = load_torch_module(train).Model().returnn_param_names
    rng = np.random.default_rng(19)
    params = random_params(train, rng)  # a checkpoint of the training network
    # the prediction network weighs more: frames of 0, 1, 2 and 3 labels, a beam better than greedy
    params["logits/rec/joint/pred_proj/W"] *= 8.0
    lens = random_lengths(train, 3, 9, rng)
    inputs = random_inputs(train, lens, rng)
    enc = run_backend("eager", str(EXAMPLE), inputs, lens, params, train).outputs["encoder"]
    frames = [(n + 1) // 2 for n in lens["time"]]  # the encoder's
    x, x_lens = {"x": inputs["x"]}, {"time": lens["time"]}

    def decoder(path, network):
        g = compile_graph(str(path), network=network)
        sizes = {d.name: d.size for d in g.dims}
        assert {p.name: tuple(sizes[d] for d in p.dims) for p in g.params} == trained
        assert load_torch_module(g).Model().returnn_param_names == torch_names
        return g

    g = decoder(EXAMPLE, "conformer_transducer_greedy")
    want = [_greedy_reference(enc[b, :n], params, 3) for b, n in enumerate(frames)]
    assert {sum(s != BLANK for s in frame) for seq in want for frame in seq} == {0, 1, 2, 3}
    for backend in BACKENDS:
        res = run_backend(backend, str(EXAMPLE), x, x_lens, params, g)
        for b, n in enumerate(frames):
            got = np.stack([res.outputs[f"sym{k}"][b, :n] for k in range(3)], axis=1)
            assert got.tolist() == want[b], backend
    greedy = None
    for beam in (1, 4):
        path = tmp_path / f"conformer_transducer_beam{beam}.py"
        path.write_text(text.replace("\nBEAM = 4  #", f"\nBEAM = {beam}  #"), encoding="utf-8")
        g = decoder(path, "conformer_transducer_search")
        res = {b: run_backend(b, str(path), x, x_lens, params, g, search=True) for b in BACKENDS}
        for backend, r in res.items():
            assert list(r.lens["output"]["align_time"]) == frames, (beam, backend)
            if beam == 1:
                for b, n in enumerate(frames):
                    want = [s for (s,) in _greedy_reference(enc[b, :n], params, 1)]
                    assert r.outputs["output"][b, :n].tolist() == want, backend
            else:
                for b, n in enumerate(frames):
                    got, best = r.outputs["output"][b, :n], res["eager"].outputs["output"][b, :n]
                    assert got.tolist() == best.tolist(), backend
            assert np.abs(r.outputs["scores"] - res["eager"].outputs["scores"]).max() <= 1e-4, (beam, backend)
        if beam == 1:
            greedy = res["eager"].outputs
        else:
            assert res["eager"].outputs["output"].tolist() != greedy["output"].tolist()
            assert (res["eager"].outputs["scores"] >= greedy["scores"] - 1e-6).all()
            assert (res["eager"].outputs["scores"] > greedy["scores"] + 1e-3).any()
