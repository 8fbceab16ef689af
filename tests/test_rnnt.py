"""rnnt_loss against an independent numpy reference (the forward variables over the (time, label)
lattice in float64, cell by cell) on every backend, with the blank last and first, on a padded batch
whose padded frames hold garbage; its gradient (the torch module's autograd and RETURNN's) against
central differences of the reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import ROOT

from netc.compiler import compile_graph
from netc_runtime.backends import BACKENDS, load_torch_module, run_backend, run_returnn
from netc_runtime.verify import random_params

MODEL = str(ROOT / "tests" / "models" / "rnnt_linear.py")
FRAMES = np.array([5, 3, 1, 4])
LABELS = np.array([3, 0, 2, 4])  # no labels at all; more labels than frames (all emitted at frame 0)


def rnnt_reference(logits: np.ndarray, labels: list[int], blank: int) -> float:
    """-log p(labels | logits [T, U+1, classes]), labels as classes (the blank's excluded)."""
    x = logits.astype(np.float64)
    logp = x - x.max(-1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    n_t, n_u1 = x.shape[0], len(labels) + 1
    alpha = np.full((n_t, n_u1), -np.inf)
    for t in range(n_t):
        for u in range(n_u1):
            if t == 0 and u == 0:
                alpha[t, u] = 0.0
                continue
            a = alpha[t - 1, u] + logp[t - 1, u, blank] if t else -np.inf
            b = alpha[t, u - 1] + logp[t, u - 1, labels[u - 1]] if u else -np.inf
            alpha[t, u] = np.logaddexp(a, b)
    return float(-(alpha[-1, -1] + logp[-1, -1, blank]))


def _batch():
    rng = np.random.default_rng(7)
    z = rng.standard_normal((4, FRAMES.max(), LABELS.max() + 1, 3)).astype(np.float32)
    y = rng.integers(0, 4, size=(4, LABELS.max())).astype(np.int32)
    for b, (n_t, n_u) in enumerate(zip(FRAMES, LABELS)):
        z[b, n_t:] = 30.0  # garbage in padded frames
        z[b, :, n_u + 1 :] = -30.0
        y[b, n_u:] = 3
    params = random_params(compile_graph(MODEL), rng)
    lens = {"time": FRAMES, "label_time": LABELS, "pred_time": LABELS + 1}
    return {"z": z, "y": y}, lens, params


def _reference(z, y, w, bias, blank: int) -> np.ndarray:
    logits = z.astype(np.float64) @ w + bias
    classes = [[k + (k >= blank) for k in y[b, :n]] for b, n in enumerate(LABELS)]
    return np.array(
        [
            rnnt_reference(logits[b, :n_t, : n_u + 1], classes[b], blank)
            for b, (n_t, n_u) in enumerate(zip(FRAMES, LABELS))
        ]
    )


@pytest.fixture(scope="module")
def runs():
    inputs, lens, params = _batch()
    g = compile_graph(MODEL)
    return inputs, lens, params, {b: run_backend(b, MODEL, inputs, lens, params, g) for b in BACKENDS}


@pytest.mark.parametrize("backend", BACKENDS)
def test_loss_is_the_reference(runs, backend):
    inputs, _, params, results = runs
    w, bias = params["logits/W"].astype(np.float64), params["logits/b"].astype(np.float64)
    out = results[backend].outputs
    for name, loss, blank in (("seq", "rnnt", 4), ("first_seq", "rnnt_first", 0)):
        want = _reference(inputs["z"], inputs["y"], w, bias, blank)
        assert np.abs(out[name] - want).max() <= 1e-5 * np.abs(want).max(), (name, out[name], want)
        assert abs(float(out[loss]) - want.sum()) <= 1e-5 * want.sum()


def _numeric_grads(inputs, params) -> dict[str, np.ndarray]:
    """d(rnnt + rnnt_first)/d(W, b) of the reference, by central differences in float64."""
    w, bias = params["logits/W"].astype(np.float64), params["logits/b"].astype(np.float64)

    def total(w_, b_):
        return sum(_reference(inputs["z"], inputs["y"], w_, b_, blank).sum() for blank in (4, 0))

    eps, grads = 1e-6, {"logits/W": np.zeros_like(w), "logits/b": np.zeros_like(bias)}
    for name, p in (("logits/W", w), ("logits/b", bias)):
        for i in np.ndindex(p.shape):
            d = np.zeros_like(p)
            d[i] = eps
            args = (w + d, bias) if name == "logits/W" else (w, bias + d)
            args_m = (w - d, bias) if name == "logits/W" else (w, bias - d)
            grads[name][i] = (total(*args) - total(*args_m)) / (2 * eps)
    return grads


def test_gradients_are_the_references():
    inputs, lens, params = _batch()
    want = _numeric_grads(inputs, params)
    g = compile_graph(MODEL)
    module = load_torch_module(g).Model()
    module.load_returnn_params(params)
    args = {k: torch.as_tensor(v) for k, v in inputs.items()}
    args.update({f"{d}_lens": torch.as_tensor(v, dtype=torch.int64) for d, v in lens.items()})
    out = module(**args)
    (out["rnnt"] + out["rnnt_first"]).backward()
    returnn = run_returnn(g, inputs, lens, params, grads=True).grads
    for name, attr in module.returnn_param_names.items():
        scale = np.abs(want[name]).max()
        np.testing.assert_allclose(module.get_parameter(attr).grad.numpy(), want[name], atol=1e-5 * scale, err_msg=name)
        np.testing.assert_allclose(returnn[name], want[name], atol=1e-5 * scale, err_msg=name)


def test_conformer_transducer_loss_is_the_reference():
    """examples/conformer_transducer.py's RNN-T loss on every backend: the reference over its own
    joint network's log-probabilities (`output`), summed over the batch, ≤1e-5 relative."""
    from conftest import EXAMPLES

    from netc_runtime.verify import random_inputs

    path = str(EXAMPLES / "conformer_transducer.py")
    g = compile_graph(path, network="conformer_transducer")
    rng = np.random.default_rng(3)
    lens = {"time": np.array([9, 6, 4]), "label_time": np.array([4, 1, 2])}  # labels <= encoder frames
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    enc_lens = (lens["time"] + 1) // 2
    for backend in BACKENDS:
        r = run_backend(backend, path, inputs, lens, params, g)
        dims = r.dims["output"]
        logp = r.outputs["output"].transpose([dims.index(d) for d in ("batch", "enc_time", "pred_time", "vocab+blank")])
        want = sum(
            rnnt_reference(logp[b, :n_t, : n_u + 1], list(inputs["y"][b, :n_u]), blank=10)
            for b, (n_t, n_u) in enumerate(zip(enc_lens, lens["label_time"]))
        )
        print(f"{backend}: rnnt {float(r.outputs['rnnt']):.6f}, reference {want:.6f}")
        assert abs(float(r.outputs["rnnt"]) - want) <= 1e-5 * want, (backend, float(r.outputs["rnnt"]), want)
