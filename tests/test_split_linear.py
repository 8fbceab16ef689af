"""split_linear: a Linear over a concat of frames or invariants and the step's own values
splits by its kernel's rows, and the part from before the loop moves out of it, on both
targets; parameters, checkpoints and (up to rounding) numbers and gradients stay as they were."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT, returnn_variables

from netc.compiler import compile_graph
from netc.emit_tf.emitter import emit_returnn
from netc.emit_torch.module import emit_torch
from netc.ir.model import Loop
from netc.passes.pipeline import PassOptions
from netc_runtime.backends import load_torch_module, run_returnn
from netc_runtime.verify import random_inputs, random_lengths, random_params

FORMS = ROOT / "tests" / "models" / "split_linear_forms.py"


def _linears(g, path: str) -> list[tuple[str, list[int] | None, bool]]:
    """The Linears of module `path`: (where: "before <loop>" or "in <loop>", rows, with bias)."""
    found = []
    for i, n in enumerate(g.body):
        if isinstance(n, Loop):
            where = f"in {n.name}"
            found += [(where, o.attrs.get("rows"), o.attrs["with_bias"]) for o in n.body if o.param == path]
        elif n.op == "linear" and n.param == path:
            after = next(m.name for m in g.body[i:] if isinstance(m, Loop))
            found.append((f"before {after}", n.attrs.get("rows"), n.attrs["with_bias"]))
    return found


def test_what_is_split():
    g = compile_graph(str(FORMS))
    # frame first, with a bias: the frame's rows (and the bias) before the loop
    assert _linears(g, "h") == [("before h_2", [0, 6], True), ("in h_2", [6, 11], False)]
    # the state first, backwards: the bias goes with the frame's part
    assert _linears(g, "hb") == [("before backward_2", [5, 11], True), ("in backward_2", [0, 5], False)]
    # an invariant, two frames (one run), the state: the step multiplies the state alone
    assert _linears(g, "hs") == [
        ("before runs_2", [0, 5], False),
        ("before runs_2", [5, 14], False),
        ("in runs_2", [14, 19], False),
    ]
    # frame, state, frame: both frames' rows before the loop
    assert _linears(g, "hw") == [
        ("before kept_2", [0, 6], True),
        ("before kept_2", [11, 14], False),
        ("in kept_2", [6, 11], False),
    ]
    # the state in two runs, and a concat read twice, stay whole
    assert _linears(g, "twice") == [("in kept_2", None, True)]
    assert _linears(g, "hw_2") == [("in kept_2", None, True)]
    # only with the kinds that keep whole sequences, and with hoisting
    for options in (PassOptions(whole_sequence=False), PassOptions(hoist=False)):
        g = compile_graph(str(FORMS), options=options)
        assert not _linears(g, "hw")[0][1]


def test_attention_step_multiplies_the_context_alone():
    """The attention decoder's `Linear(hidden)(concat(prev_emb, context))`: the embedding's
    rows run over all frames before the loop; torch's step is one addmm of the context."""
    g = compile_graph(str(EXAMPLES / "attention.py"))
    loop = next(n.name for n in g.body if isinstance(n, Loop))
    assert _linears(g, "s") == [(f"before {loop}", [0, 8], True), (f"in {loop}", [8, 24], False)]
    code = emit_torch(g)
    step = code[code.index("for t in range") : code.index("s_steps.append")]
    assert "torch.cat" not in step
    assert "= torch.addmm(s_prev_emb_2, context, s_W_8_24)" in step
    assert "s_W_8_24 = self.s.W[8:24]" in code  # sliced once per call


@pytest.mark.parametrize("model", [FORMS, EXAMPLES / "attention.py"])
def test_returnn_keeps_the_model_variables(model):
    """Both parts read the one variable by the model's name and shape: RETURNN trains and
    saves exactly the model's parameters."""
    g = compile_graph(str(model))
    config = emit_returnn(g)
    assert "netc_param(" in config
    want = {p.name: tuple(g.dim(d).size for d in p.dims) for p in g.params}
    params, trainable, every = returnn_variables(config, train=True)
    assert params == want
    assert trainable == every == set(want)


def test_gradients_are_the_unsplit_ones():
    """Training's gradients of the attention decoder's loss: RETURNN split (both parts' rows
    reach the one variable) = RETURNN unsplit = the torch module's, split."""
    model = EXAMPLES / "attention.py"
    split = compile_graph(str(model))
    whole = compile_graph(str(model), options=PassOptions(hoist=False))
    rng = np.random.default_rng(4)
    lens = random_lengths(split, 3, 7, rng)
    inputs = random_inputs(split, lens, rng)
    params = random_params(split, rng)
    got = run_returnn(split, inputs, lens, params, grads=True).grads
    want = run_returnn(whole, inputs, lens, params, grads=True).grads
    assert set(got) == set(want) == set(params)
    for name in params:
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, err_msg=name)

    module = load_torch_module(split).Model()
    module.load_returnn_params(params)
    args = {k: torch.as_tensor(v) for k, v in inputs.items()}
    args.update({f"{d}_lens": torch.as_tensor(v, dtype=torch.int64) for d, v in lens.items()})
    module(**args)["ce"].backward()
    for name, attr in module.returnn_param_names.items():
        np.testing.assert_allclose(module.get_parameter(attr).grad.numpy(), got[name], atol=1e-4, err_msg=name)
