"""The speech ops against hand-written numpy, on every backend, on a padded batch whose padded
frames hold large garbage (a leak would win every max): max_pool with windows of 2 and 3 on odd
lengths, LstmCell as TF's LSTMCell, GruCell as torch's GRUCell, maxout as RETURNN's reduce_out,
split/merge_dims order, label smoothing as RETURNN's formula, CTC as torch's own `ctc_loss`."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import ROOT

from netc.compiler import compile_graph
from netc_runtime.backends import BACKENDS, run_backend
from netc_runtime.verify import random_params

MODELS = ROOT / "tests" / "models"
LENS = np.array([7, 5, 2])  # 5: a window of 2 would reach into padding; 2: a window of 3 would


def _batch(feat: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 7, feat)).astype(np.float32)
    for b, n in enumerate(LENS):
        x[b, n:] = 50.0  # garbage that would win any max
    return x


def _run(model: str, inputs: dict, lens: dict, seed: int = 0):
    """Results of every backend, and the parameters by module path and role (`h/W`)."""
    path = str(MODELS / model)
    g = compile_graph(path)
    params = random_params(g, np.random.default_rng(seed))
    by_path = {f"{p.path}/{p.role}": params[p.name] for p in g.params}
    return {b: run_backend(b, path, inputs, lens, params, g) for b in BACKENDS}, by_path


def _pool(x: np.ndarray, n: int, k: int) -> np.ndarray:
    return np.stack([x[j : min(j + k, n)].max(axis=0) for j in range(0, n, k)])


@pytest.fixture(scope="module")
def pool_runs():
    x = _batch(4)
    return x, _run("ops_pool.py", {"x": x}, {"time": LENS})


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_pool_windows_never_take_padding(pool_runs, backend):
    x, (runs, params) = pool_runs
    res = runs[backend]
    h = np.tanh(x @ params["h/W"] + params["h/b"])
    for b, n in enumerate(LENS):
        halves, thirds = _pool(h[b], n, 2), _pool(x[b], n, 3)
        np.testing.assert_allclose(res.outputs["output"][b, : len(halves)], halves, atol=1e-6)
        np.testing.assert_allclose(res.outputs["thirds"][b, : len(thirds)], thirds, atol=1e-6)
    assert list(res.lens["output"]["half_time"]) == [4, 3, 1]
    assert list(res.lens["thirds"]["third_time"]) == [3, 2, 1]


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.mark.parametrize("backend", BACKENDS)
def test_lstm_cell_is_tf_lstm_cell(backend):
    """TF's LSTMCell by hand: z = [x, h] @ kernel + bias; gates i, g, f, o; forget bias 1."""
    x = _batch(4, seed=1)
    runs, p = _run("ops_lstm_cell.py", {"x": x}, {"time": LENS}, seed=1)
    res = runs[backend]
    kernel, bias = p["lstm_cell/lstm_cell/kernel"], p["lstm_cell/lstm_cell/bias"]
    for b, n in enumerate(LENS):
        h = np.tanh(x[b, :n].sum(axis=0) @ p["h/W"] + p["h/b"])
        c = np.full(3, 0.5, np.float32)
        for t in range(n):
            z = np.concatenate([x[b, t], h, h]) @ kernel + bias  # the cell's input is concat(x_t, h)
            i, g, f, o = np.split(z, 4)
            c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            np.testing.assert_allclose(res.outputs["output"][b, t], h, atol=1e-5)
            np.testing.assert_allclose(res.outputs["cs"][b, t], c, atol=1e-5)
        np.testing.assert_allclose(res.outputs["last_c"][b], c, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gru_cell_is_torch_gru_cell(backend):
    """torch's own nn.GRUCell (gate blocks r, z, n; r after the state's projection), loaded with
    the cell's parameters: a cell on concat(x_t, h), one from zeros, one backward (fused on torch)."""
    x = _batch(4, seed=3)
    runs, p = _run("ops_gru_cell.py", {"x": x}, {"time": LENS}, seed=3)
    out = runs[backend].outputs

    def cell(path: str) -> torch.nn.GRUCell:
        w_ih = torch.as_tensor(p[f"{path}/ih/W"])
        c = torch.nn.GRUCell(w_ih.shape[0], 3)
        with torch.no_grad():
            c.weight_ih.copy_(w_ih.T)
            c.weight_hh.copy_(torch.as_tensor(p[f"{path}/hh/W"]).T)
            c.bias_ih.copy_(torch.as_tensor(p[f"{path}/ih/b"]))
            c.bias_hh.copy_(torch.as_tensor(p[f"{path}/hh/b"]))
        return c

    on_concat, plain, back = cell("h_2"), cell("g"), cell("b")
    with torch.no_grad():
        for b, n in enumerate(LENS):
            xs = torch.as_tensor(x[b, :n])
            h = torch.tanh(xs.sum(0) @ torch.as_tensor(p["h/W"]) + torch.as_tensor(p["h/b"]))[None]
            g = torch.zeros(1, 3)
            for t in range(n):
                h = on_concat(torch.cat([xs[t : t + 1], h], dim=1), h)
                g = plain(xs[t : t + 1], g)
                np.testing.assert_allclose(out["output"][b, t], h[0], atol=1e-5)
                np.testing.assert_allclose(out["plain"][b, t], g[0], atol=1e-5)
            np.testing.assert_allclose(out["last_h"][b], h[0], atol=1e-5)
            g = torch.zeros(1, 3)
            for t in reversed(range(n)):  # aligned with the input frames
                g = back(xs[t : t + 1], g)
                np.testing.assert_allclose(out["back"][b, t], g[0], atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_maxout_and_dim_order(backend):
    x = _batch(6, seed=2)
    runs, p = _run("ops_elementwise.py", {"x": x}, {"time": LENS}, seed=2)
    out = runs[backend].outputs
    y = x @ p["y/W"] + p["y/b"]
    mixed = np.maximum(x, y) - np.minimum(x, 0.5) + np.maximum(-1.0, y) * np.minimum(x, y)
    bounded = np.clip(mixed, -1.5, 2.0) + np.abs(y) ** 2 + np.abs(x) ** 0.5
    maxout = np.maximum(bounded[..., 0::2], bounded[..., 1::2])  # RETURNN reduce_out: pieces 2j, 2j+1
    swapped = y.reshape(3, 7, 2, 3).transpose(0, 1, 3, 2).reshape(3, 7, 6)  # merged as (head_feat, heads)
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out["output"][b, :n], maxout[b, :n], atol=1e-5)
        np.testing.assert_allclose(out["merged"][b, :n], 2.0 * y[b, :n], atol=1e-5)
        np.testing.assert_allclose(out["swapped"][b, :n], swapped[b, :n], atol=1e-6)
    np.testing.assert_allclose(out["bos"], np.tile(p["bos/W"][2], (3, 1)), atol=1e-7)
    assert out["label"].tolist() == [1, 1, 1]


def _smoothed_ce(logits: np.ndarray, label: int, p: float) -> float:
    """RETURNN's smoothing_cross_entropy, in float64."""
    v = logits.shape[-1]
    logp = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
    low = p / (v - 1)
    q = np.full(v, low)
    q[label] = 1.0 - p
    return float(-(q * logp).sum() + (1 - p) * math.log(1 - p) + (v - 1) * low * math.log(low + 1e-20))


@pytest.mark.parametrize("backend", BACKENDS)
def test_label_smoothing_is_returnns_and_ctc_is_torchs(backend):
    x = _batch(4, seed=3)
    y = np.random.default_rng(3).integers(0, 5, size=(3, 7)).astype(np.int32)
    runs, p = _run("ops_losses.py", {"x": x, "y": y}, {"time": LENS}, seed=3)
    out = runs[backend].outputs
    logits = (np.tanh(x.astype(np.float64)) @ p["logits/W"] + p["logits/b"]).astype(np.float64)
    want = sum(_smoothed_ce(logits[b, t], int(y[b, t]), 0.1) for b, n in enumerate(LENS) for t in range(n))
    assert out["ce_smooth"] == pytest.approx(want, rel=1e-5)
    for b, n in enumerate(LENS):
        for t in range(n):
            assert out["output"][b, t] == pytest.approx(_smoothed_ce(logits[b, t], int(y[b, t]), 0.2), abs=1e-5)
    # CTC: torch's own implementation on the labels this backend computed
    eager = runs["eager"]
    labels_len = (LENS + 2) // 3
    ctc_logits = torch.tensor(x) @ torch.tensor(p["per_seq/W"]) + torch.tensor(p["per_seq/b"])
    pooled = np.stack(
        [np.pad(_pool(x[b], n, 3), ((0, 3 - len(_pool(x[b], n, 3))), (0, 0))) for b, n in enumerate(LENS)]
    )
    labels = torch.tensor(pooled @ p["labels/W"] + p["labels/b"]).argmax(-1)
    want = torch.nn.functional.ctc_loss(
        torch.log_softmax(ctc_logits, -1).transpose(0, 1),
        labels,
        torch.tensor(LENS),
        torch.tensor(labels_len),
        blank=5,
        reduction="none",
        zero_infinity=True,
    ).numpy()
    np.testing.assert_allclose(out["ctc_seq"], want, rtol=1e-5)
    np.testing.assert_allclose(eager.outputs["ctc_seq"], want, rtol=1e-5)
