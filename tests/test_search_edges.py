"""Beam searches at the edges of the language: a search that takes no input (an unconditional
LM), an `if` on a hypothesis' values in and after the searched loop, a `choice` whose label
nothing reads, exported searches. (Searches all three targets agree on are verified in
test_models.py's test_decoders_searched.)"""

from __future__ import annotations

import io
import textwrap

import numpy as np
import pytest
import torch
from conftest import ROOT, assert_located_error, run_netc

from netc.compiler import compile_graph
from netc_runtime.backends import _import_file, load_torch_module, run_backend
from netc_runtime.returnn_torch import run_returnn_torch
from netc_runtime.verify import TOLERANCE, compare, random_inputs, random_lengths, random_params

MODELS = ROOT / "tests" / "models"
LM = MODELS / "search_no_inputs.py"

# torch 2.13 deprecates TorchScript (for torch.export), which it still runs as before
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")


def _batch(g, seed: int = 2):
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, 3, 6, rng)
    return random_inputs(g, lens, rng), lens, random_params(g, rng)


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert set(a) == set(b)
    for k in a:
        assert a[k].shape == b[k].shape, k
        assert float((a[k].double() - b[k].double()).abs().max()) <= 1e-6, k


def test_search_without_input_is_given_a_batch_size():
    """The LM's search: `search(batch_size)`, `forward(search=True, batch_size=...)`, or the
    target's batch size; eager mode alike; the scripted module too. Without either: a TypeError."""
    g = compile_graph(str(LM))
    _, _, params = _batch(g)
    model = load_torch_module(g).Model().eval()
    model.load_returnn_params(params)
    net = _import_file(str(LM), "lm_eager").search_no_inputs
    net.load_returnn_params(params)
    y = torch.zeros(4, 2, dtype=torch.int64)
    with torch.no_grad():
        ref = model.search(4)
        assert ref["output"].shape[0] == 4 and ref["time_lens"].tolist() == [ref["time_lens"][0].item()] * 4
        _same(ref, model(search=True, batch_size=4))
        _same(ref, model(y, search=True))  # the target's batch size, its labels unread
        _same(ref, net(search=True, batch_size=4))
        _same(ref, net(y=y, time_lens=torch.tensor([2, 2, 1, 1]), search=True))
        buf = io.BytesIO()
        torch.jit.save(torch.jit.script(model), buf)
        buf.seek(0)
        scripted = torch.jit.load(buf)
        _same(ref, scripted.search(4))
        _same(ref, scripted(search=True, batch_size=4))
    with pytest.raises(TypeError, match="search needs batch_size"):
        model(search=True)
    with pytest.raises(TypeError, match="search needs batch_size"):
        net(search=True)


def test_variables_named_like_the_search_arguments(tmp_path):
    """Model variables named `search` and `batch_size` get other names in `forward`, which takes
    arguments of those names (TorchScript would not let a tensor rebind them)."""
    src = LM.read_text().replace(
        "    h = full(batch, hidden, value=0.0)\n",
        "    search = full(batch, hidden, value=0.0)\n    batch_size = search + 1.0\n    h = batch_size - 1.0\n",
    )
    path = tmp_path / "lm_names.py"
    path.write_text(src)
    g = compile_graph(str(path))
    model = load_torch_module(g).Model().eval()
    scripted = torch.jit.script(model)
    y = torch.zeros(2, 3, dtype=torch.int64)
    with torch.no_grad():
        _same(model(search=True, batch_size=2), scripted(search=True, batch_size=2))
        _same(model(y, torch.tensor([3, 2])), scripted(y, torch.tensor([3, 2])))


def test_search_without_input_on_returnn_torch_and_the_cli(tmp_path):
    """RETURNN's PyTorch backend searches with the target's batch size (`forward_step`); `netc run
    --search` reads `in:y` for it on every backend."""
    g = compile_graph(str(LM))
    inputs, lens, params = _batch(g)
    want = run_backend("torch", str(LM), inputs, lens, params, g, search=True)
    got = run_returnn_torch(g, inputs, lens, params)
    for name in ("output", "scores"):
        np.testing.assert_allclose(got.outputs[name], want.outputs[name], atol=1e-6, err_msg=name)
    assert got.lens["output"]["time"].tolist() == want.lens["output"]["time"].tolist()
    run_netc("run", LM, "--template", "-o", tmp_path / "in.npz", check=True)
    outs = {}
    for backend in ("eager", "torch", "returnn"):
        out = tmp_path / f"{backend}.npz"
        run_netc("run", LM, "--search", "--backend", backend, "--inputs", tmp_path / "in.npz", "-o", out, check=True)
        outs[backend] = dict(np.load(out))
    batch = len(np.load(tmp_path / "in.npz")["in:y"])
    for backend in ("torch", "returnn"):
        lengths = outs[backend]["outlen:output:time"]
        assert lengths.tolist() == outs["eager"]["outlen:output:time"].tolist() and len(lengths) == batch
        np.testing.assert_allclose(outs[backend]["out:scores"], outs["eager"]["out:scores"], atol=1e-5)
        for b, n in enumerate(lengths):
            assert (outs[backend]["out:output"][b, :n] == outs["eager"]["out:output"][b, :n]).all()


def test_returnn_torch_search_marks_the_dims_ops_made():
    """`forward_step` marks a search's results over dims ops made with the lengths the search
    returns (`sub_lens`, `pooled_lens`), as the module gives them."""
    path = MODELS / "search_made_dims.py"
    g = compile_graph(str(path))
    inputs, lens, params = _batch(g)
    want = run_backend("torch", str(path), inputs, lens, params, g, search=True)
    got = run_returnn_torch(g, inputs, lens, params)
    for name in ("labels", "atts", "pool_atts", "scores"):
        np.testing.assert_allclose(got.outputs[name], want.outputs[name], atol=1e-6, err_msg=name)
        assert {d: v.tolist() for d, v in got.lens[name].items()} == {d: v.tolist() for d, v in want.lens[name].items()}
    assert set(got.lens["atts"]) == {"sub", "dec"} and set(got.lens["pool_atts"]) == {"pooled", "dec"}


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_export_of_a_search_without_input(tmp_path, fmt):
    proc = run_netc("export", LM, "--format", fmt, "--search", "-o", tmp_path / f"lm.{fmt}", check=True)
    assert "(batch_size[]) -> (output[batch, time], time_lens[batch], scores[batch])" in proc.stdout
    assert "checked: batch 4: max|Δ| = " in proc.stdout


def test_torch_export_refuses_a_search_without_input(tmp_path):
    src = LM.read_text()
    proc = run_netc("export", LM.name, "--format", "torch-export", "--search", "-o", tmp_path / "lm.pt2", cwd=LM.parent)
    line = src.splitlines().index("    for _ in range(6):") + 1
    assert_located_error(proc, src, LM.name, line, "for _", "torch-export: this search takes no input")


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_export_of_a_search_with_a_constant_bound(tmp_path, fmt):
    """`range(4)`: the search's step limit is a bool tensor in TorchScript (not `tensor | bool`)."""
    model = MODELS / "search_const_bound.py"
    proc = run_netc("export", model, "--format", fmt, "--search", "-o", tmp_path / f"m.{fmt}", check=True)
    assert "-> (output[batch, time], time_lens[batch], scores[batch])" in proc.stdout


IF_IN_LOOP = """\
from netc import Dim, Embedding, Labels, Linear, Tensor, batch, cast, choice, end, full, network, reduce_mean, tanh, zeros

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def model(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    label = full(batch, value=0, class_dim=vocab)
    m = reduce_mean(x, axis=time)
    steps = zeros(batch)
    labels = []
    for _ in range(8):
        h = tanh(Embedding(feat)(label) + m)
        if CONDITION:
            h = 0.5 * h
        label = choice(Linear(vocab)(h), target=y, beam=3)
        steps = steps + cast(label >= 0, "float32")  # the same in every hypothesis
        labels.append(label)
        if end(label == 0):
            break
    return {"labels": labels}
"""


def test_eager_if_in_a_searched_loop(tmp_path):
    """Eagerly an `if` in the searched loop takes the branch all hypotheses agree on; where they
    disagree, Python can run only one: a located error (use `where`)."""
    agree = tmp_path / "agree.py"
    agree.write_text(IF_IN_LOOP.replace("CONDITION", "steps > 100.0"))
    g = compile_graph(str(agree))
    inputs, lens, params = _batch(g)
    res = {b: run_backend(b, str(agree), inputs, lens, params, g, search=True) for b in ("eager", "torch")}
    for c in compare(g, res["eager"], res["torch"], "torch"):
        assert c.max_abs_diff <= TOLERANCE, c
    src = IF_IN_LOOP.replace("CONDITION", "label != 2")
    (tmp_path / "disagree.py").write_text(src)
    proc = run_netc("verify", "disagree.py", "--search", cwd=tmp_path)
    progress = "".join(f"{line}\n" for line in proc.stderr.splitlines() if line.startswith("netc: "))
    assert progress == "netc: verify: running eager\n"
    proc.stderr = proc.stderr[len(progress) :]
    line = src.splitlines().index("        if label != 2:") + 1
    assert_located_error(proc, src, "disagree.py", line, "label != 2", "the hypotheses of this beam search disagree")


def test_search_returns_the_lengths_of_a_dim_only_an_expand_names(tmp_path):
    """The loop names `pooled` only in an `expand` (the `max_pool` making it feeds nothing it
    reads): the torch search still computes its lengths, and returns them."""
    src = textwrap.dedent(
        """\
        from netc import Dim, Embedding, Labels, Linear, Tensor, batch, choice, end, expand, full, max_pool, network
        from netc import reduce_mean, tanh

        time = Dim("time")
        pooled = Dim("pooled")
        dec = Dim("dec")
        feat = Dim("feat", 4)
        vocab = Dim("vocab", 5)


        @network
        def model(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
            unread = max_pool(x, axis=time, size=2, out_axis=pooled)
            m = reduce_mean(x, axis=time)
            label = full(batch, value=0, class_dim=vocab)
            labels, wide = [], []
            for _ in range(8):
                e = Embedding(feat)(label)
                label = choice(Linear(vocab)(tanh(e + m)), target=y, beam=2)
                labels.append(label)
                wide.append(expand(e, pooled))
                if end(label == 0):
                    break
            return {"labels": labels, "wide": wide}
        """
    )
    path = tmp_path / "expand_pooled.py"
    path.write_text(src)
    g = compile_graph(str(path))
    inputs, lens, params = _batch(g)
    res = {b: run_backend(b, str(path), inputs, lens, params, g, search=True) for b in ("eager", "torch")}
    for c in compare(g, res["eager"], res["torch"], "torch"):
        assert c.max_abs_diff <= TOLERANCE, c
    assert res["torch"].lens["wide"]["pooled"].tolist() == [(n + 1) // 2 for n in lens["time"]]
