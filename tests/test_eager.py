"""Eager mode: the model file runs as plain Python, one sequence at a time, with the emitted
module's interface (same arguments, same returned dict, parameters by RETURNN name)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT

from netc.compiler import compile_graph
from netc_runtime.backends import _import_file, load_torch_module


@pytest.fixture(scope="module")
def elman():
    return _import_file(str(EXAMPLES / "elman.py"), "eager_test").elman


def test_same_interface_as_the_torch_module(elman):
    mod = load_torch_module(compile_graph(str(EXAMPLES / "elman.py")))
    model = mod.Model()
    model.load_returnn_params({k: v.numpy() for k, v in elman.params.items()})
    x = torch.randn(3, 5, 40)
    lens = torch.tensor([5, 2, 4])
    a = elman(x, lens)
    b = elman(x=x, time_lens=lens)
    c = model(x, time_lens=lens)
    assert set(a) == set(c) == {"output", "last"}
    assert elman.output_dims == model.output_dims
    assert set(elman.params) == set(model.returnn_param_names)
    for k in a:
        torch.testing.assert_close(a[k], b[k])
        assert a[k].shape == c[k].shape
        mask = (torch.arange(5)[None, :] < lens[:, None])[:, :, None] if a[k].dim() == 3 else torch.ones(1, dtype=bool)
        assert ((a[k] - c[k]).abs() * mask).max() < 1e-5


def test_each_sequence_runs_alone(elman):
    """A sequence's result does not depend on the other sequences or on padding."""
    x = torch.randn(2, 6, 40)
    both = elman(x, torch.tensor([6, 3]))
    alone = elman(x[1:2, :3], torch.tensor([3]))
    torch.testing.assert_close(both["output"][1, :3], alone["output"][0])
    torch.testing.assert_close(both["last"][1], alone["last"][0])
    assert torch.all(both["output"][1, 3:] == 0)


def test_load_returnn_params_by_name(elman):
    saved = {k: v.clone() for k, v in elman.params.items()}
    try:
        zero_w, bias = np.zeros((32, 32), np.float32), np.full(32, 0.25, np.float32)
        elman.load_returnn_params({"out/rec/h/W": zero_w, "out/rec/h/b": bias})
        out = elman(torch.randn(1, 3, 40), torch.tensor([3]))
        torch.testing.assert_close(out["last"], torch.full((1, 32), float(np.tanh(0.25))))
        with pytest.raises(KeyError, match="unknown parameter"):
            elman.load_returnn_params({"h/W": np.zeros(3)})
    finally:
        elman.load_returnn_params(saved)


def test_the_source_runs_literally_step_by_step(tmp_path):
    """A print in the loop body prints once per step of each sequence: the code is executed as written."""
    model = tmp_path / "printing.py"
    model.write_text(
        (EXAMPLES / "elman.py")
        .read_text()
        .replace("        out.append(h)", "        print('step')\n        out.append(h)")
    )
    code = (
        f"import sys, torch; sys.path.insert(0, {str(ROOT)!r})\n"
        "from netc_runtime.backends import _import_file\n"
        f"net = _import_file({str(model)!r}, 'p').elman\n"
        "net(torch.randn(2, 4, 40), torch.tensor([4, 3]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.count("step") == 4 + 3


END_AT_FIRST_STEP = """\
from netc import Dim, Linear, Tensor, batch, end, network, reduce_sum, stack, tanh

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    s = reduce_sum(Linear(hidden)(x), axis=time)
    c = reduce_sum(reduce_sum(x, axis=feat), axis=time)
    out = []
    while True:
        s = tanh(Linear(hidden)(s))
        c = c - 1.0
        if end(c < 0.5):
            break
        y = s * 2.0
        out.append(y)
    return {"output": out, "y": RESULT}


def doubled(a):
    return stack(a) * 2.0
"""


@pytest.mark.parametrize(
    "result,call,message",
    [
        # a value assigned only after the `break`: a loop ending at its first step never assigns it
        # (rejected by the compiler, whatever the batch)
        ("y", "y}", "`y` is assigned only after `if end(...): break` in the loop at line 13"),
        # a list that loop stacked nothing in, read by an op under a name no stack has: nothing
        # tells its dims
        ("doubled(out)", "stack(a)", "eager mode cannot use an empty list as a tensor"),
    ],
)
def test_a_loop_ending_at_its_first_step_is_a_located_error(tmp_path, result, call, message):
    """Sequence 1 ends at its first step: a value it never assigned, or a list it stacked nothing
    in read as a tensor where the graph has no stack of its name, has no value."""
    from conftest import assert_located_error, run_netc

    src = END_AT_FIRST_STEP.replace("RESULT", result)
    model = tmp_path / "m.py"
    model.write_text(src)
    x = np.ones((2, 3, 4), np.float32)
    x[1] = -1.0
    np.savez(tmp_path / "in.npz", **{"in:x": x, "len:time": np.array([3, 2])})
    proc = run_netc("run", model, "--backend", "eager", "--inputs", tmp_path / "in.npz", "-o", tmp_path / "o.npz")
    line = next(i for i, text in enumerate(src.splitlines(), 1) if call in text)
    assert_located_error(proc, src, str(model), line, call, message)


def test_an_empty_list_read_as_a_tensor_is_a_stack_of_no_frames(tmp_path):
    """Sequence 1 ends at its first step, stacking nothing: `stack(out) * 2.0` is a stack of length
    0, its dims those of the graph's stack `out`."""
    from conftest import run_netc

    model = tmp_path / "m.py"
    model.write_text(END_AT_FIRST_STEP.replace("RESULT", "stack(out) * 2.0"))
    x = np.ones((2, 3, 4), np.float32)
    x[1] = -1.0
    np.savez(tmp_path / "in.npz", **{"in:x": x, "len:time": np.array([3, 2])})
    proc = run_netc("run", model, "--backend", "eager", "--inputs", tmp_path / "in.npz", "-o", tmp_path / "o.npz")
    assert proc.returncode == 0, proc.stderr
    out = np.load(tmp_path / "o.npz")
    lens = out["outlen:y:out_time"]
    assert lens[1] == 0 and lens[0] > 0 and list(lens) == list(out["outlen:output:out_time"])
    np.testing.assert_allclose(out["out:y"][0, : lens[0]], 2.0 * out["out:output"][0, : lens[0]], rtol=1e-6)


LAST_VALUE_APPENDED = """\
from netc import Dim, Linear, Tensor, batch, end, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + h)
    last = h
    out = []
    for _ in range(3):
        h = tanh(Linear(hidden)(h))
        out.append(last)
        if end(reduce_sum(h, axis=hidden) > -5.0):  # every sequence ends at its first step
            break
    return {"output": out}
"""


def test_a_returned_list_of_an_earlier_loops_value_is_stacked_in_its_own_loop(tmp_path):
    """`out.append(last)`, `last` made by a finished loop: for a sequence of one frame that loop ran
    one step, as many as the list has items, yet the list is the later loop's stack (seed 20025)."""
    from conftest import run_netc

    model = tmp_path / "m.py"
    model.write_text(LAST_VALUE_APPENDED)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", **{"in:x": x, "len:time": np.array([3, 1])})
    outs = {}
    for backend in ("eager", "torch"):
        out = tmp_path / f"{backend}.npz"
        run_netc("run", model, "--backend", backend, "--inputs", tmp_path / "in.npz", "-o", out, check=True)
        outs[backend] = np.load(out)
    assert list(outs["eager"]["dims:output"]) == ["batch", "out_time", "hidden"]
    np.testing.assert_allclose(outs["eager"]["out:output"], outs["torch"]["out:output"], atol=1e-6)


EMPTY_STACK_OF_A_STATE = """\
from netc import Dim, Tensor, batch, network, slice_frames, zeros

time = Dim("time")
feat = Dim("feat", 4)
later = Dim("later")


@network
def f(x: Tensor[batch, time, feat]):
    acc = zeros(batch, time)
    out = []
    for _ in slice_frames(x, axis=time, start=1, out_axis=later):
        out.append(acc)
    return {"output": out}
"""


BODY_ONLY_NAME = """\
from netc import Dim, Linear, Tensor, batch, network, slice_frames, tanh

time = Dim("time")
feat = Dim("feat", 4)
later = Dim("later")


@network
def f(x: Tensor[batch, time, feat]):
    for x_t in slice_frames(x, axis=time, start=1, out_axis=later):
        h = tanh(Linear(feat)(x_t))
    return {"last": h}
"""


def test_a_name_only_a_loop_of_no_step_assigns_is_a_located_error(tmp_path):
    """Sequence 1 has one frame, so no frame after the first: the loop runs no step for it and
    `h` has no value after it, as in Python (diffgen seed 26080); the compiled targets give zeros."""
    from conftest import assert_located_error, run_netc

    model = tmp_path / "m.py"
    model.write_text(BODY_ONLY_NAME)
    np.savez(tmp_path / "in.npz", **{"in:x": np.ones((2, 3, 4), np.float32), "len:time": np.array([3, 1])})
    proc = run_netc("run", model, "--backend", "eager", "--inputs", tmp_path / "in.npz", "-o", tmp_path / "o.npz")
    line = BODY_ONLY_NAME.splitlines().index('    return {"last": h}') + 1
    assert_located_error(
        proc, BODY_ONLY_NAME, str(model), line, "h}", "has no value for sequence 1 of the batch: it is assigned only"
    )
    proc = run_netc("run", model, "--backend", "torch", "--inputs", tmp_path / "in.npz", "-o", tmp_path / "o.npz")
    assert proc.returncode == 0, proc.stderr
    assert not np.load(tmp_path / "o.npz")["out:last"][1].any()


def test_an_empty_returned_stack_keeps_the_lengths_of_its_other_dims(tmp_path):
    """A sequence of one frame: the loop over its later frames runs no step, the returned stack of
    a [batch, time] value is empty, yet its `time` is this sequence's (diffgen seed 20547)."""
    from conftest import run_netc

    model = tmp_path / "m.py"
    model.write_text(EMPTY_STACK_OF_A_STATE)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", **{"in:x": x, "len:time": np.array([3, 1])})
    outs = {}
    for backend in ("eager", "torch"):
        out = tmp_path / f"{backend}.npz"
        run_netc("run", model, "--backend", backend, "--inputs", tmp_path / "in.npz", "-o", out, check=True)
        outs[backend] = dict(np.load(out))
    assert list(outs["eager"]["dims:output"]) == list(outs["torch"]["dims:output"])
    for key in outs["torch"]:
        if key.startswith("outlen:"):
            np.testing.assert_array_equal(outs["eager"][key], outs["torch"][key], err_msg=key)
    np.testing.assert_array_equal(outs["eager"]["outlen:output:time"], [3, 1])


# models whose eager run once differed from the torch module on a batch with these lengths
EAGER_CASES = [
    # `h13`, the last state of a loop over a dim with one frame for a sequence, appended once
    # per step of a later loop over time, read as a tensor: the later loop's stack (seed 100092)
    ("later_loop_appends_last_state.py", {"time": [6, 4, 1], "enc": [7, 3, 1]}),
    # `zip(a, b)` is one loop run: its inner lists stack over the inner dim (seed 100099)
    ("zip_outer_inner_stack.py", {"time": [6, 3, 2], "enc": [7, 3, 1]}),
    # a backward outer loop's end reverses its own list, not the last inner one (seed 100630)
    ("backward_outer_inner_lists.py", {"time": [6, 3, 2], "enc": [7, 3, 1]}),
    # ... also when the inner loop iterates a plain list an earlier loop stacked (seed 25408)
    ("backward_outer_plain_list_inner.py", {"time": [6, 3, 2], "enc": [7, 3, 1]}),
]


@pytest.mark.parametrize(("model", "lengths"), EAGER_CASES)
def test_eager_agrees_with_the_torch_module(model, lengths):
    """A sequence whose dims have equal lengths (or one frame) made eager mode's loop tagging
    take one loop for another."""
    from netc_runtime.backends import run_eager, run_torch
    from netc_runtime.verify import compare, random_inputs, random_params

    path = str(ROOT / "tests" / "models" / model)
    g = compile_graph(path)
    rng = np.random.default_rng(0)
    lens = {d: np.array(v) for d, v in lengths.items()}
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    eager, torch_ = run_eager(path, g, inputs, lens, params), run_torch(g, inputs, lens, params)
    comps = compare(g, eager, torch_, "torch")
    assert comps and all(c.ok for c in comps), comps


def test_a_run_of_the_oracle_leaves_no_network_behind():
    """`verify` imports the model file for each eager run: its network (and the parameters it
    holds, gigabytes for a large model) is freed after the run, not kept in `sys.modules`."""
    import gc
    import weakref

    from netc_runtime.backends import run_eager
    from netc_runtime.verify import random_inputs, random_params

    path = str(EXAMPLES / "elman.py")
    g = compile_graph(path)
    rng = np.random.default_rng(0)
    lens = {"time": np.array([4, 2, 3])}
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    before = set(sys.modules)
    nets = []
    real = _import_file

    def watched(p: str, prefix: str):
        mod = real(p, prefix)
        nets.append(weakref.ref(getattr(mod, g.network)))
        return mod

    import netc_runtime.backends as backends

    backends._import_file, saved = watched, backends._import_file
    try:
        run_eager(path, g, inputs, lens, params)
    finally:
        backends._import_file = saved
    gc.collect()
    assert len(nets) == 1 and nets[0]() is None
    assert not [m for m in set(sys.modules) - before if m.startswith("netc_model")]


def test_random_params_are_float64_draws_cast_to_float32():
    """Drawn a piece at a time (no float64 copy of a whole parameter), the numbers are those of
    one float64 draw per parameter, as every recorded oracle run had them."""
    from netc_runtime.verify import random_params

    g = compile_graph(str(EXAMPLES / "elman.py"))
    sizes = {d.name: d.size for d in g.dims}
    drawn = random_params(g, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    for p in g.params:
        shape = [sizes[d] for d in p.dims]
        if len(shape) >= 2:
            limit = np.sqrt(6.0 / (shape[0] + shape[-1]))
            want = rng.uniform(-limit, limit, size=shape).astype(np.float32)
        else:
            want = ((p.init == "ones") + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        assert drawn[p.name].dtype == np.float32
        np.testing.assert_array_equal(drawn[p.name], want)
