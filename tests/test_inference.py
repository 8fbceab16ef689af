"""`netc compile --target torch --inference`: the module for inference, written by the real CLI.
The training module's `state_dict` loads into it as it is (strict); it returns the outputs
without losses, the same as the training module's; a decoder searches by default, taking only
what the search needs; it scripts with TorchScript."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT, run_netc

from netc.compiler import compile_graph
from netc.ir.search import search_plan
from netc.naming import lens_name
from netc_runtime.backends import load_torch_module
from netc_runtime.verify import random_inputs, random_lengths

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")


def _load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Model


# the last: a state whose stack only a loss reads (torch's decisions made again without it)
PATHS = [EXAMPLES / n for n in ("elman.py", "attention.py", "librispeech_2018.py", "beam_search.py")] + [
    ROOT / "tests" / "models" / "inference_state_stack_read_by_loss.py"
]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_inference_module(tmp_path, path):
    name = path.name
    out = tmp_path / f"{name[:-3]}_inference.py"
    run_netc("compile", path, "--target", "torch", "--inference", "-o", out, check=True)
    assert "--target torch --inference`" in out.read_text()
    g = compile_graph(str(path))
    torch.manual_seed(0)
    training = load_torch_module(g).Model().eval()
    model = _load(out)().eval()
    model.load_state_dict(training.state_dict())  # strict: the same parameters
    rng = np.random.default_rng(4)
    lens = random_lengths(g, 3, 7, rng)
    args = {k: torch.as_tensor(v) for k, v in random_inputs(g, lens, rng).items()}
    args.update({lens_name(d): torch.as_tensor(v, dtype=torch.int64) for d, v in lens.items()})
    plan = search_plan(g)
    with torch.no_grad():
        if plan is None:
            ref = {k: v for k, v in training(**args).items() if k not in training.losses}
            got = model(**args)
            scripted = torch.jit.script(model)(**args)
        else:  # decodes by default, from the inputs the search takes
            needs = [*plan.inputs, *(lens_name(d) for d in plan.input_dims)]
            ref = training(**args, search=True)
            got = model(**{k: args[k] for k in needs})
            scripted = torch.jit.script(model)(**{k: args[k] for k in needs})
    assert training.losses or plan is not None or name == "elman.py"
    assert not set(got) & set(training.losses) and set(got) == set(ref) == set(scripted)
    for k, r in ref.items():  # TorchScript's fusions may round differently
        assert torch.equal(got[k], r), k
        assert scripted[k].shape == r.shape and torch.allclose(scripted[k], r, rtol=0, atol=1e-6), k


def test_inference_is_for_torch():
    proc = run_netc("compile", EXAMPLES / "elman.py", "--target", "returnn", "--inference")
    assert proc.returncode == 2 and "--inference applies to --target torch" in proc.stderr
