"""Every emitted torch module scripts (`torch.jit.script`) and computes what the module itself does.

For each example and test model: forward (with its targets, in evaluation mode) and, for a
`choice` decoder, `search=True` give the same outputs (<= 1e-6, relative for larger values) and
the same best labels, lengths and scores; in training mode (dropout on, the same seed) the
outputs and the gradients of the summed losses agree too. The scripted module is also saved and
loaded back (what is deployed without netc or the module's source) and run twice (TorchScript
optimises its graph after a first profiling run).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT, example_network

from netc.compiler import compile_graph
from netc.ir.interface import interface
from netc.ir.search import search_plan
from netc_runtime.backends import load_torch_module
from netc_runtime.verify import random_inputs, random_lengths

# torch 2.13 deprecates TorchScript (for torch.export), which it still runs as before
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")

# `transducer_search` and `ctc_prefix_search` with an LM function run their search in Python,
# which TorchScript cannot script: `netc export` refuses them (tests/test_transducer_search_errors.py,
# tests/test_ctc_decoding_lm.py)
PYTHON_ONLY = {
    "transducer_search.py",
    "transducer_search_functions.py",
    "ctc_decoding_lm.py",
    "stream_transducer.py",
    "lm_searches_after_a_choice_loop.py",
}
MODELS = sorted(EXAMPLES.glob("*.py")) + sorted(
    p for p in (ROOT / "tests" / "models").glob("*.py") if p.name not in PYTHON_ONLY
)


def _batch(g) -> dict[str, torch.Tensor]:
    """A padded batch of 3 with unequal lengths (and garbage in padded frames)."""
    rng = np.random.default_rng(0)
    lens = random_lengths(g, 3, 6, rng)
    args = {k: torch.as_tensor(v) for k, v in random_inputs(g, lens, rng).items()}
    args.update({interface(g).input_lens[d]: torch.as_tensor(v, dtype=torch.int64) for d, v in lens.items()})
    return args


def _same(ref: dict[str, torch.Tensor], out: dict[str, torch.Tensor], what: str) -> None:
    assert set(out) == set(ref), what
    for name, r in ref.items():
        o = out[name]
        assert o.shape == r.shape and o.dtype == r.dtype, f"{what}: {name}"
        if r.is_floating_point():  # 1e-6, relative to values (a summed loss) larger than 1
            tol = 1e-6 * max([1.0, *r.abs().flatten().tolist()])
            assert max([0.0, *(o - r).abs().flatten().tolist()]) <= tol, f"{what}: {name}"
        else:
            assert torch.equal(o, r), f"{what}: {name}"


def _scripted(module: torch.nn.Module) -> torch.jit.ScriptModule:
    """Scripted, then saved and loaded back."""
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    buf.seek(0)
    return torch.jit.load(buf)


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_scripted_module_computes_the_same(path):
    g = compile_graph(str(path), network=example_network(path))
    torch.manual_seed(0)
    model = load_torch_module(g).Model().eval()
    scripted = _scripted(model).eval()
    args = _batch(g)
    with torch.no_grad():
        ref = model(**args)
        for run in (1, 2):
            _same(ref, scripted(**args), f"forward, run {run}")
        if search_plan(g) is not None:
            ref = model(**args, search=True)
            for run in (1, 2):
                _same(ref, scripted(**args, search=True), f"search, run {run}")
    # training: dropout draws the same masks from the same seed; gradients of the losses
    model.train()
    scripted.train()
    outs, grads = [], []
    for m in (model, scripted):
        torch.manual_seed(1)
        m.zero_grad()
        out = m(**args)
        if g.losses:
            sum(out[loss.name] for loss in g.losses).backward()
        outs.append({k: v.detach() for k, v in out.items()})
        grads.append({n: p.grad for n, p in m.named_parameters() if p.grad is not None})
    _same(outs[0], outs[1], "training")
    _same(grads[0], grads[1], "gradients")
    assert not g.losses or grads[0], "the losses reach parameters"


def test_models_cover_every_example_and_test_model():
    assert len(MODELS) >= 70
    assert {p.name for p in MODELS} >= {"librispeech_2018.py", "beam_search.py", "lstm.py", "zip_backward_list.py"}
