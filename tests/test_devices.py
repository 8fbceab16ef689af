"""The emitted torch module follows its inputs: float64, bfloat16, the meta device, autocast.

Every tensor `forward` creates (initial states, masks, stacks, lengths) takes the inputs'
device and float dtype; labels stay int64 on that device.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT, example_network

from netc.compiler import compile_graph
from netc.ir.interface import interface
from netc_runtime.backends import load_torch_module, output_dims
from netc_runtime.verify import random_inputs, random_lengths, valid_mask

MODELS = sorted(EXAMPLES.glob("*.py")) + [
    ROOT / "tests" / "models" / m
    for m in ("core_ops.py", "losses.py", "native_lstm.py", "ops_where.py", "ops_cast.py", "ops_layer_norm.py")
    + (
        "ops_pool.py",
        "ops_lstm_cell.py",
        "ops_elementwise.py",
        "ops_losses.py",
        "fuse_lstm_forms.py",
        "fuse_gru_forms.py",
        "ops_gru_cell.py",
        "fuse_cell_ops.py",
        "split_linear_forms.py",
        "ops_sin_logsumexp_one_hot.py",
        "ops_range_over.py",
        "ops_frames.py",
        "ops_self_attention.py",
        "ops_rel_pos_attention.py",
        "ops_chunk_mask.py",
        "training_flag.py",
        "grow_self_attention.py",
        "grow_decoder.py",
        "ops_conv.py",
        "ops_conv_causal.py",
        "ops_batch_norm.py",
        "ops_conv2d.py",
        "ops_conv2d_strided.py",
        "ops_bias.py",
        "ops_transposed_conv.py",
    )
]
# an `end` loop decides from values when to stop: nothing to decide on the meta device
HAS_END = {"greedy_decoder.py"}


def _setup(path):
    g = compile_graph(str(path), network=example_network(path))
    rng = np.random.default_rng(0)
    lens = random_lengths(g, 3, 6, rng)
    inputs = random_inputs(g, lens, rng)
    torch.manual_seed(0)  # the module's initial parameters: each run compares the same numbers
    model = load_torch_module(g).Model().eval()
    return g, lens, inputs, model


def _batch(g, lens, inputs, dtype, device):
    api = interface(g)
    out = {}
    for k, v in inputs.items():
        t = torch.as_tensor(v, device=device)
        out[k] = t.to(dtype) if t.is_floating_point() else t
    out.update({api.input_lens[d]: torch.as_tensor(v, device=device) for d, v in lens.items()})
    return out


def _compare(g, lens, ref, out, tol):
    dims = output_dims(g)
    for name, r in ref.items():
        if name not in dims or not r.is_floating_point():
            continue
        all_lens = {**lens, **{d: ref[k].numpy() for d, k in interface(g).made_lens.items()}}
        mask = valid_mask(dims[name], all_lens, g, r.shape)
        diff = (out[name].double() - r.double()).abs().numpy()
        assert float(np.where(mask, diff, 0.0).max(initial=0.0)) <= tol * (1 + float(r.abs().max())), name


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_float64(path):
    g, lens, inputs, model = _setup(path)
    with torch.no_grad():
        ref = model(**_batch(g, lens, inputs, torch.float32, "cpu"))
        model.double()
        out = model(**_batch(g, lens, inputs, torch.float64, "cpu"))
    for name, r in ref.items():
        want = torch.float64 if r.is_floating_point() else r.dtype
        assert out[name].dtype == want, name
    _compare(g, lens, ref, out, 1e-5)


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_bfloat16(path):
    g, lens, inputs, model = _setup(path)
    with torch.no_grad():
        ref = model(**_batch(g, lens, inputs, torch.float32, "cpu"))
        model.to(torch.bfloat16)
        out = model(**_batch(g, lens, inputs, torch.bfloat16, "cpu"))
    for name, r in ref.items():
        assert out[name].dtype == (torch.bfloat16 if r.is_floating_point() else r.dtype), name
        assert out[name].shape == r.shape
    if path.name == "data_dependent_if.py":
        ref = _branch_taken(ref, out)
    if path.name != "ops_cast.py":  # float -> int of bfloat16 values may truncate to another integer
        _compare(g, lens, ref, out, 0.1)


def _branch_taken(ref: dict, out: dict) -> dict:
    """`y = 2h if sum(h) > 1 else -h`: where the float32 sum is within bfloat16 rounding of the
    threshold, the bfloat16 run may take the other branch (it can: a branch is a step function);
    the reference then follows the branch it took. Elsewhere the branch must be the same."""
    s = ref["last"].double().sum(-1)
    near = (s - 1.0).abs() <= 0.05 * (1 + s.abs())
    last, y = out["last"].double(), out["y"].double()
    took_first = (y - 2 * last).abs().amax(-1) < (y + last).abs().amax(-1)
    want = torch.where(took_first[:, None], 2 * ref["last"], -ref["last"])
    return {**ref, "y": torch.where(near[:, None], want, ref["y"])}


@pytest.mark.parametrize("path", [p for p in MODELS if p.name not in HAS_END], ids=lambda p: p.name)
def test_meta_device(path):
    g, lens, inputs, model = _setup(path)
    with torch.no_grad():
        ref = model(**_batch(g, lens, inputs, torch.float32, "cpu"))
        model.to("meta")
        out = model(**_batch(g, lens, inputs, torch.float32, "meta"))
    assert set(out) == set(ref)
    for name, r in ref.items():
        assert out[name].device.type == "meta" and out[name].shape == r.shape and out[name].dtype == r.dtype


def test_labels_stay_int64_on_the_inputs_device():
    g, lens, inputs, model = _setup(EXAMPLES / "greedy_decoder.py")
    model.double()
    with torch.no_grad():
        out = model(**_batch(g, lens, inputs, torch.float64, "cpu"))
    assert out["output"].dtype == torch.int64
    assert out["labels_time_lens"].dtype == torch.int64


def test_autocast_bfloat16():
    g, lens, inputs, model = _setup(EXAMPLES / "attention.py")
    batch = _batch(g, lens, inputs, torch.float32, "cpu")
    with torch.no_grad():
        ref = model(**batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(**batch)
    assert out["output"].dtype in (torch.bfloat16, torch.float32)  # matmuls in bfloat16, adds promote
    assert not torch.equal(out["output"], ref["output"])  # autocast took effect
    _compare(g, lens, ref, out, 0.1)


def test_training_step_in_float64():
    """Gradients flow in float64 too: one Adam step changes every parameter."""
    g, lens, inputs, model = _setup(EXAMPLES / "attention.py")
    model.double().train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loss = model(**_batch(g, lens, inputs, torch.float64, "cpu"))["ce"]
    assert loss.dtype == torch.float64
    loss.backward()
    opt.step()
    assert all(not torch.equal(before[n], p) for n, p in model.named_parameters())
