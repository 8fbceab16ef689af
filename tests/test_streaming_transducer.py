"""A transducer streamed with `netc export --streaming` (the real CLI): the encoder's step module
(or the whole-sequence encoder), the prediction and joint networks as step modules exported from
the functions `transducer_search` takes, and the search on the host
(`netc_runtime.stream_runner.TransducerDecoder`) = netc's own search, on a padded batch with
unequal lengths: the same labels, scores within 1e-5."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from conftest import EXAMPLES, ROOT, run_netc

from netc.compiler import compile_graph
from netc_runtime.backends import run_eager, run_torch
from netc_runtime.stream_runner import StepModule, TransducerDecoder, run
from netc_runtime.verify import random_inputs, random_lengths, random_params

TOL = 1e-5
CONFORMER = EXAMPLES / "conformer_transducer.py"


def _npz(params, path) -> str:
    np.savez(path, **{f"param:{k}": v for k, v in params.items()})
    return str(path)


def _found(result, name: str = "labels") -> list[list[int]]:
    labels, lens = result.outputs[name], result.lens[name]["dec_time"]
    return [labels[b, : int(n)].tolist() for b, n in enumerate(lens)]


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("method,beam,max_sym", [("greedy", 1, 2), ("modified", 3, 1)])
def test_streamed_encoder_and_decoder_equal_netc_search(method, beam, max_sym, fmt, tmp_path):
    text = (ROOT / "tests" / "models" / "stream_transducer.py").read_text()
    text = text.replace('METHOD = "greedy"', f"METHOD = {method!r}").replace("BEAM = 1", f"BEAM = {beam}")
    model = tmp_path / "stream_transducer.py"
    model.write_text(text.replace("MAX_SYM = 2", f"MAX_SYM = {max_sym}"))
    g = compile_graph(str(model))
    rng = np.random.default_rng(5)
    lens = random_lengths(g, 4, 9, rng)
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    out = tmp_path / f"enc.{fmt}"
    proc = run_netc(
        "export", model, "--streaming", "--format", fmt, "-o", out, "--params", _npz(params, tmp_path / "p.npz")
    )
    assert proc.returncode == 0, proc.stderr
    assert "the encoder's step over `time`" in proc.stdout and f"{method} search" in proc.stdout
    enc = run(StepModule(out), inputs, lens["time"])["encoder"]  # [batch, time, hidden], frame by frame
    found, scores = TransducerDecoder(tmp_path / "enc.decoder.json").search(enc, lens["time"])
    for ref in (run_torch(g, inputs, lens, params), run_eager(str(model), g, inputs, lens, params)):
        assert found == _found(ref)
        np.testing.assert_allclose(scores, ref.outputs["scores"], atol=TOL, rtol=0)
    assert any(found), "some sequence has labels"


def _by_torch_name(g, params: dict[str, np.ndarray], other) -> dict[str, np.ndarray]:
    """`params` (of `g`) under `other`'s names: a parameter is the same module's same role (the
    greedy network's loop names its parameters after it, `logits/rec/...`)."""
    by_path = {(p.path, p.role): params[p.name] for p in g.params}
    return {p.name: by_path[(p.path, p.role)] for p in other.params}


def test_conformer_decoder_equals_netc_greedy_and_modified(tmp_path):
    """examples/conformer_transducer.py: the encoder (attention over the whole sequence) as a
    whole-sequence module, the decoder streamed; host greedy (3 symbols a frame) = the example's
    `conformer_transducer_greedy`, host modified beam search = `conformer_transducer_modified`."""
    g = compile_graph(str(CONFORMER), network="conformer_transducer_modified")
    rng = np.random.default_rng(7)
    lens = random_lengths(g, 3, 12, rng)
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    out = tmp_path / "ct.onnx"
    args = ["export", CONFORMER, "--network", "conformer_transducer_modified", "--streaming", "--format", "onnx"]
    refused = run_netc(*args, "-o", out)
    assert (
        refused.returncode == 1
        and "conformer_transducer.py:128:13: error: cannot stream over `enc_time`" in refused.stderr
    )
    proc = run_netc(*args, "--whole-encoder", "-o", out, "--params", _npz(params, tmp_path / "p.npz"))
    assert proc.returncode == 0, proc.stderr
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    enc, enc_lens = session.run(
        ["encoder", "enc_time_lens"], {"x": inputs["x"], "time_lens": lens["time"].astype(np.int64)}
    )
    decoder = TransducerDecoder(tmp_path / "ct.decoder.json")

    modified = run_torch(g, inputs, lens, params)
    found, scores = decoder.search(enc, enc_lens)
    assert found == _found(modified, "output")
    np.testing.assert_allclose(scores, modified.outputs["scores"], atol=TOL, rtol=0)

    greedy_g = compile_graph(str(CONFORMER), network="conformer_transducer_greedy")
    greedy = run_torch(greedy_g, inputs, lens, _by_torch_name(g, params, greedy_g)).outputs
    blank = decoder.blank
    ref = [
        [int(greedy[f"sym{k}"][b, t]) for t in range(int(n)) for k in range(3) if greedy[f"sym{k}"][b, t] != blank]
        for b, n in enumerate(enc_lens)
    ]
    found, _ = decoder.search(enc, enc_lens, method="greedy", max_sym_per_frame=3)
    assert found == ref
    assert any(found)


def test_encoder_without_a_loop_streams_frame_by_frame(tmp_path):
    """tests/models/transducer_search.py: the encoder is per-frame work only (no loop, no cache):
    it streams over the search's `axis`; modified beam search (beam 3) on the host = netc's."""
    model = ROOT / "tests" / "models" / "transducer_search.py"
    g = compile_graph(str(model))
    rng = np.random.default_rng(11)
    lens = random_lengths(g, 3, 8, rng)
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    out = tmp_path / "enc.onnx"
    proc = run_netc(
        "export", model, "--streaming", "--format", "onnx", "-o", out, "--params", _npz(params, tmp_path / "p.npz")
    )
    assert proc.returncode == 0, proc.stderr
    assert "caches: none" in proc.stdout
    enc = run(StepModule(out), inputs, lens)["encoder"]
    found, scores = TransducerDecoder(tmp_path / "enc.decoder.json").search(enc, lens["time"])
    ref = run_torch(g, inputs, lens, params)
    assert found == _found(ref)
    np.testing.assert_allclose(scores, ref.outputs["scores"], atol=TOL, rtol=0)
