"""Hostile names from every place a name can come from: emitted files never run user text,
never clash with their own names, and keep the model's interface (`model(**batch)`).

A payload that would write a marker file is put into every string a user controls (dim
names, output and loss names, the file name); identifiers take the names emitted code uses
itself (`torch`, `self`, `B`, nn.Module members, ...). The emitted files are imported and
run, and all three backends must still agree.
"""

from __future__ import annotations

import ast
import os
import runpy

import numpy as np
import pytest
import torch
from conftest import ROOT, run_netc

from netc.compiler import TARGETS, compile_graph
from netc.emit_torch.emitter import GENERATED_MEMBERS, NN_MODULE_MEMBERS
from netc.emit_torch.module import emit_torch
from netc.errors import CompileError
from netc.ir.interface import interface
from netc.naming import identifier, py_str
from netc_runtime.backends import load_torch_module, run_torch
from netc_runtime.returnn_torch import run_returnn_torch
from netc_runtime.verify import TOLERANCE, random_inputs, random_lengths, random_params, verify

MARKER = "PWNED_BY_NAME"
# closes every kind of string and comment, then runs code that leaves a marker file
PAYLOAD = f"x\"\"\"'''\"'\n\r\x00\\\nopen({MARKER!r}, 'w')\n#\u2028"

MODEL = """\
from netc import Dim, Linear, Module, Tensor, batch, mark_as_loss, network, reduce_sum, stack, tanh, zeros

time = Dim({time})
feat = Dim({feat}, 3)
hidden = Dim({hidden}, 4)


class Cell(Module):
    def __init__(self):
        self._modules = Linear(hidden)
        self.forward = Linear(hidden, with_bias=False)

    def __call__(self, x, h):
        return tanh(self._modules(x) + self.forward(h))


@network
def {net}(torch: Tensor[batch, time, feat], B: Tensor[batch, feat]):
    losses = Cell()
    input_dims = zeros(batch, hidden)
    get_parameter = []
    for self in torch:
        input_dims = losses(self + B, input_dims)
        get_parameter.append(input_dims)
    mark_as_loss(reduce_sum(stack(get_parameter), axis=hidden), {loss})
    return {{{out1}: get_parameter, {out2}: input_dims}}
"""


def _model(tmp_path, filename: str, **names: str):
    names = {k: py_str(v) if k != "net" else v for k, v in names.items()}
    path = tmp_path / filename
    path.write_text(MODEL.format(**names), encoding="utf-8")
    return path


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an injected `open(MARKER, 'w')` would land here
    yield tmp_path
    assert not (tmp_path / MARKER).exists(), "user text ran as code"


def test_nn_module_members_are_current():
    public = {n for n in [*dir(torch.nn.Module), *vars(torch.nn.Module())] if not n.startswith("_")}
    assert public <= NN_MODULE_MEMBERS
    assert {"forward", "load_returnn_params", "returnn_param_names", "losses", "input_dims"} <= GENERATED_MEMBERS


def test_hostile_strings_and_identifiers_on_torch_and_eager(in_tmp):
    path = _model(
        in_tmp,
        f"evil{PAYLOAD.replace(chr(0), '').replace('/', '')}.py",
        time=f"time{PAYLOAD}",
        feat=f"feat{PAYLOAD}",
        hidden=f"2*hidden{PAYLOAD}",
        net="Model",
        loss=f"loss{PAYLOAD}",
        out1=f"out{PAYLOAD}",
        out2="data",
    )
    g = compile_graph(str(path))
    text = emit_torch(g)
    compile(text, "emitted.py", "exec")  # parses; `in_tmp` checks that importing ran nothing
    model = load_torch_module(g, str(in_tmp)).Model()
    api = interface(g)
    (lens_arg,) = api.input_lens.values()
    assert lens_arg == identifier(f"time{PAYLOAD}_lens")
    batch = {"torch": torch.randn(2, 5, 3), "B": torch.randn(2, 3), lens_arg: torch.tensor([5, 3])}
    out = model(**batch)
    assert set(out) == {f"out{PAYLOAD}", "data", f"loss{PAYLOAD}"}
    # parameter attributes do not shadow nn.Module: the module still works as one
    assert {n for n, _ in model.named_parameters()} == set(model.returnn_param_names.values())
    assert all(a.split(".")[0] not in NN_MODULE_MEMBERS for a in model.returnn_param_names.values())
    model.double()
    out64 = model(**{k: v.double() if v.is_floating_point() else v for k, v in batch.items()})
    assert out64["data"].dtype == torch.float64


def test_hostile_file_name_in_headers(in_tmp):
    name = f"m{PAYLOAD.replace(chr(0), '').replace('/', '')}.py"
    path = _model(in_tmp, name, time="time", feat="feat", hidden="hidden", net="net", loss="l", out1="o", out2="p")
    for target in ("returnn", "torch", "returnn-torch"):
        out = in_tmp / f"out_{target}.py"
        run_netc("compile", path, "--target", target, "-o", out, check=True)
        runpy.run_path(str(out))  # importing runs the header: `in_tmp` checks nothing was injected
        assert py_str(name) in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("time", ["__t", " <t"])
def test_dim_whose_lengths_name_would_be_mangled(tmp_path, time):
    """`__t_lens` as an argument of the torch module's `forward` would be renamed by Python
    (`_M__t_lens`): the lengths go by `_t_lens`, on every backend."""
    path = _model(tmp_path, "m.py", time=time, feat="f", hidden="h", net="n", loss="l", out1="o", out2="p")
    g = compile_graph(str(path))
    assert interface(g).input_lens[time] == "_t_lens"
    comps, _ = verify(str(path), g, seed=1)
    assert {c.backend for c in comps} == {"torch", "returnn"}
    for c in comps:
        assert c.max_abs_diff <= TOLERANCE and c.valid_frames > 0, c


def test_input_named_self_is_a_located_error(tmp_path):
    path = _model(tmp_path, "m.py", time="t", feat="f", hidden="h", net="n", loss="l", out1="o", out2="p")
    path.write_text(path.read_text().replace("B: Tensor", "self: Tensor").replace("self + B", "self"))
    proc = run_netc("compile", path, "--target", "torch")
    assert proc.returncode == 1 and "m.py:18:41: error" in proc.stderr and "cannot be named `self`" in proc.stderr


def test_returnn_rejects_names_it_cannot_hold(in_tmp):
    path = _model(in_tmp, "m.py", time="t", feat="f", hidden="h", net="net", loss="l", out1=f"o{PAYLOAD}", out2="p")
    proc = run_netc("compile", path, "--target", "returnn")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert ": error: RETURNN target: output 'o" in proc.stderr
    path = _model(in_tmp, "m2.py", time="t", feat="f", hidden="h", net="net", loss="l", out1="o", out2="data")
    proc = run_netc("compile", path, "--target", "returnn")
    assert proc.returncode == 1 and "m2.py:26:" in proc.stderr and "`data` is a name RETURNN reserves" in proc.stderr


def test_hostile_names_agree_on_all_backends(in_tmp):
    """Names RETURNN can hold (dims with any text, inputs named like emitted code's own names,
    an input named `classes`): eager, torch and RETURNN give the same numbers."""
    path = _model(
        in_tmp,
        "agree.py",
        time=f"enc-time{PAYLOAD}",
        feat=f"a b{PAYLOAD}",
        hidden="a_b",
        net="torch",
        loss="classes",
        out1="output",
        out2="prev",
    )
    src = path.read_text().replace("prev", "state")
    path.write_text(src.replace("B: Tensor", "classes: Tensor").replace("self + B", "self + classes"))
    g = compile_graph(str(path))
    comps, _ = verify(str(path), g, seed=3)
    assert {c.backend for c in comps} == {"torch", "returnn"}
    for c in comps:
        assert c.max_abs_diff <= TOLERANCE and c.valid_frames > 0, c


@pytest.mark.parametrize(
    "decl, msg",
    [
        ('a = Dim("a b")\n    b = Dim("a_b")', "would both pass their lengths as `a_b_lens`"),
        ('a = Dim("2*feat", 5)', "makes dim `2*feat` of size 6, but the model declares `2*feat` of size 5"),
    ],
)
def test_dim_name_collisions_are_located_errors(tmp_path, decl, msg):
    src = f"""\
from netc import Dim, Linear, Tensor, batch, network

feat = Dim("feat", 3)


@network
def net(x: Tensor[batch, Dim("time"), feat]):
    {decl}
    return Linear(2 * feat)(x)
"""
    path = tmp_path / "m.py"
    path.write_text(src)
    with pytest.raises(CompileError) as e:
        compile_graph(str(path))
    assert msg in e.value.message and e.value.span is not None


def test_output_named_like_a_lengths_result(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        (ROOT / "examples" / "greedy_decoder.py").read_text().replace('"output": labels', '"labels_time_lens": labels')
    )
    proc = run_netc("compile", path, "--target", "torch")
    assert proc.returncode == 1, proc.stderr
    assert "the lengths result `labels_time_lens` of dim `labels_time` has the same name as output" in proc.stderr
    assert os.path.basename(path) + ":" in proc.stderr and "Traceback" not in proc.stderr


def test_numbers_stay_the_same_with_hostile_names(in_tmp):
    """Renaming does not change numbers: the hostile model equals the plain one."""
    plain = _model(in_tmp, "plain.py", time="t", feat="f", hidden="h", net="n", loss="l", out1="o", out2="p")
    evil = _model(in_tmp, "evil.py", time=PAYLOAD, feat="f", hidden="h", net="n", loss="l", out1="o", out2="p")
    outs = []
    for path in (plain, evil):
        g = compile_graph(str(path))
        model = load_torch_module(g, str(in_tmp)).Model()
        torch.manual_seed(0)
        model.reset_parameters()
        (lens_arg,) = interface(g).input_lens.values()
        x = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 4, 3)).astype(np.float32))
        outs.append(model(torch=x, B=x[:, 0], **{lens_arg: torch.tensor([4, 2])}))
    torch.testing.assert_close(outs[0]["o"], outs[1]["o"])


def test_output_is_byte_for_byte_deterministic(in_tmp):
    """Hash randomisation must not reach emitted names: two processes, two hash seeds, same bytes."""
    import subprocess
    import sys

    path = _model(in_tmp, "d.py", time=PAYLOAD, feat="a b", hidden="a_b", net="n", loss="l", out1="o", out2="p")
    netc = os.path.join(os.path.dirname(sys.executable), "netc")
    for target in ("returnn", "torch", "returnn-torch"):
        texts = set()
        for seed in ("1", "2", "3"):
            env = dict(os.environ, PYTHONHASHSEED=seed)
            proc = subprocess.run([netc, "compile", str(path), "--target", target], capture_output=True, env=env)
            assert proc.returncode == 0, proc.stderr
            texts.add(proc.stdout)
        assert len(texts) == 1, target


def test_base_config_name_cannot_inject(in_tmp):
    """The --base-config path lands in a comment of the merged config: quoted, never raw."""
    model = _model(in_tmp, "m.py", time="t", feat="f", hidden="h", net="n", loss="l", out1="o", out2="p")
    base = in_tmp / f"base{PAYLOAD.replace(chr(0), '').replace('/', '')}.py"
    base.write_text("#!rnn.py\nnum_epochs = 1\n")
    for target in ("returnn", "returnn-torch"):
        out = in_tmp / f"merged_{target}.py"
        run_netc("compile", model, "--target", target, "--base-config", base, "-o", out, check=True)
        runpy.run_path(str(out))  # `in_tmp` checks nothing was injected


def _calls_open(text: str) -> bool:
    """Whether the code calls `open` anywhere: the payload's injected call."""
    return any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "open" for n in ast.walk(ast.parse(text)))


def test_hostile_names_in_the_returnn_torch_config(in_tmp):
    """Every user string in the config's code and its entry points' marks (outputs, losses, dims
    with the payload; inputs and the network named like the config's and the module's own
    names): RETURNN's PyTorch backend runs its train_step and forward_step, in `in_tmp`, and they
    give the module's numbers."""
    path = _model(
        in_tmp,
        "rt.py",
        time=f"time{PAYLOAD}",
        feat=f"feat{PAYLOAD}",
        hidden=f"2*hidden{PAYLOAD}",
        net="get_model",
        loss=f"loss{PAYLOAD}",
        out1=f"out{PAYLOAD.replace(chr(0), '')}",  # RETURNN's PyTorch backend ends names at NUL: see below
        out2="extern_data",
    )
    src = path.read_text(encoding="utf-8").replace("B: Tensor", "rf: Tensor").replace("self + B", "self + rf")
    path.write_text(src.replace("torch: Tensor", "model: Tensor").replace("in torch:", "in model:"), encoding="utf-8")
    g = compile_graph(str(path))
    text = TARGETS["returnn-torch"](g)
    assert not _calls_open(text)
    assert "class Get_model(nn.Module)" in text or "class GetModel(nn.Module)" in text
    rng = np.random.default_rng(0)
    lens = random_lengths(g, batch=2, max_len=4, rng=rng)
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    got = run_returnn_torch(g, inputs, lens, params, workdir=str(in_tmp))
    want = run_torch(g, inputs, lens, params)
    assert (
        got.outputs.keys()
        == want.outputs.keys()
        == {f"out{PAYLOAD.replace(chr(0), '')}", "extern_data", f"loss{PAYLOAD}"}
    )
    for name, value in want.outputs.items():
        np.testing.assert_allclose(got.outputs[name], value, atol=1e-6)
    # a model with `choice`: its forward_step marks the searched outputs by their hostile names
    beam = in_tmp / "beam.py"
    beam_src = (ROOT / "examples" / "beam_search.py").read_text()
    beam.write_text(beam_src.replace('"logits": logits', f"{repr('l' + PAYLOAD.replace(chr(0), ''))}: logits"))
    proc = run_netc("compile", beam.name, "--target", "returnn-torch", "-o", "beam.config", cwd=in_tmp, check=True)
    config = (in_tmp / "beam.config").read_text(encoding="utf-8")
    assert not _calls_open(config)  # no payload anywhere, not even in a function runpy does not call
    runpy.run_path(str(in_tmp / "beam.config"))  # `in_tmp` checks nothing was injected
    # an output named with a NUL character: a located error, not a failing forward_step
    path.write_text(path.read_text(encoding="utf-8").replace(repr("extern_data"), repr("a\x00b")), encoding="utf-8")
    proc = run_netc("compile", path.name, "--target", "returnn-torch", cwd=in_tmp)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("rt.py:26:") and "output 'a\\x00b' has a NUL character" in proc.stderr, proc.stderr
