"""fuse_cells: loops that are LSTMs or GRUs run as one native call, with the model's own
parameters, and give the numbers the loops give (eager = RETURNN = torch, fused or not)."""

from __future__ import annotations

import pytest
import torch
from conftest import EXAMPLES, ROOT, returnn_variables

from netc.compiler import compile_graph
from netc.emit_tf.emitter import emit_returnn
from netc.emit_torch.module import emit_torch
from netc.passes.pipeline import PassOptions

LSTM_FORMS = ROOT / "tests" / "models" / "fuse_lstm_forms.py"
GRU_FORMS = ROOT / "tests" / "models" / "fuse_gru_forms.py"
CELL_OPS = ROOT / "tests" / "models" / "fuse_cell_ops.py"


def _fused_ops(g) -> list[str]:
    return [n.op for n in g.body if getattr(n, "unfused", None)]


@pytest.mark.parametrize(
    "model,fused",
    [
        (EXAMPLES / "lstm.py", ["lstm_loop"]),
        (LSTM_FORMS, ["lstm_loop"] * 3),
        (GRU_FORMS, ["gru_loop"] * 2),
        (CELL_OPS, ["lstm_loop", "gru_loop", "lstm_loop"]),  # loops of LstmCell / GruCell steps
        (ROOT / "tests" / "models" / "ops_lstm_cell.py", []),  # two cells in one loop, input reads state
        (EXAMPLES / "gru.py", []),  # TF's GRU (r before the state's projection): torch has no such kernel
        (EXAMPLES / "elman.py", []),
        (EXAMPLES / "attention.py", []),
    ],
)
def test_what_is_fused(model, fused):
    assert _fused_ops(compile_graph(str(model))) == fused
    assert _fused_ops(compile_graph(str(model), options=PassOptions(fuse=False))) == []
    assert _fused_ops(compile_graph(str(model), options=PassOptions(hoist=False))) == []


@pytest.mark.parametrize("model", [LSTM_FORMS, GRU_FORMS, CELL_OPS])
@pytest.mark.parametrize("fuse", ["--fuse", "--no-fuse"])
def test_fused_and_unfused_verify(verify, model, fuse):
    proc = verify(model, "--seed", "3", "--batch", "4", "--max-len", "9", fuse)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    assert "eager vs returnn" in proc.stdout and "eager vs torch" in proc.stdout


def test_torch_runs_one_native_call():
    code = emit_torch(compile_graph(str(EXAMPLES / "lstm.py")))
    assert code.count("= torch.lstm(") == 1 and "for t in range" not in code
    code = emit_torch(compile_graph(str(GRU_FORMS)))
    # one helper, called twice; its two calls: packed (valid frames only), and padded on `meta`
    assert code.count("= torch.gru(") == 2 and "for t in range" not in code
    assert code.count("pack_padded_sequence(") == 1
    assert code.count("= _gru_loop(x") == 2


def _module(model, fuse: bool):
    g = compile_graph(str(model), options=PassOptions(fuse=fuse))
    ns: dict = {}
    exec(compile(emit_torch(g), f"<{model.name}>", "exec"), ns)
    return ns["Model"]()


@pytest.mark.parametrize("model", [EXAMPLES / "lstm.py", LSTM_FORMS, GRU_FORMS, CELL_OPS])
def test_fused_module_equals_the_loop(model):
    """Same parameters (same names), same outputs on valid frames, including a sequence of no
    frames (its last state is the initial one) and training's gradients."""
    torch.manual_seed(0)
    fused, loop = _module(model, True), _module(model, False)
    assert [n for n, _ in fused.named_parameters()] == [n for n, _ in loop.named_parameters()]
    loop.load_state_dict(fused.state_dict())
    g = compile_graph(str(model))
    assert fused.input_dims == [["x", ["batch", "time", "feat"]]]
    x = torch.randn(4, 9, g.dim("feat").size)
    lens = torch.tensor([9, 0, 4, 1])
    got, want = fused(x, lens), loop(x, lens)
    assert got.keys() == want.keys()
    mask = torch.arange(9)[None, :] < lens[:, None]
    for k in got:
        a, b = got[k], want[k]
        if a.dim() == 3:  # frames: valid ones only (padded ones are zeros on both)
            a, b = a * mask[:, :, None], b * mask[:, :, None]
        assert torch.allclose(a, b, atol=1e-5), (k, (a - b).abs().max())
    lens = torch.tensor([9, 2, 4, 1])  # a mean over no frames would make NaN gradients
    sum(v.sum() for v in fused(x, lens).values()).backward()
    sum(v.sum() for v in loop(x, lens).values()).backward()
    for (name, p), q in zip(fused.named_parameters(), loop.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-4), name


@pytest.mark.parametrize(
    "model,native",
    [
        (LSTM_FORMS, 1),  # the backward joint kernel; the others have two biases or a start
        (CELL_OPS, 1),  # the LstmCell loop from zeros (its forget bias added to the unit's bias)
        (ROOT / "tests" / "models" / "ops_gru_cell.py", 0),  # GruCell's subnetwork of linears
    ],
)
def test_returnn_keeps_the_model_variables(model, native):
    """RETURNN trains and saves a fused LSTM's variables under the model's own names (none of
    the unit's), the joint kernel of a backward loop included; likewise `GruCell`'s."""
    g = compile_graph(str(model))
    config = emit_returnn(g)
    assert config.count("'unit': 'nativelstm2'") == native
    want = {p.name: tuple(g.dim(d).size for d in p.dims) for p in g.params}
    params, trainable, every = returnn_variables(config, train=True)
    assert params == want
    assert trainable == every == set(want)
