"""Tied parameters (`Linear(vocab, weight=emb.weight)`): one variable on every target (the torch
module's state_dict, RETURNN's TF variables, trained in a rec unit too), gradients from every
use, and located errors for ties that cannot be."""

from __future__ import annotations

import pytest
import torch
from conftest import ROOT, assert_located_error, returnn_variables, run_netc

from netc.compiler import compile_graph
from netc.emit_tf.emitter import emit_returnn
from netc.emit_torch.module import emit_torch

LM = ROOT / "tests" / "models" / "tied_lm.py"
DECODER = ROOT / "tests" / "models" / "tied_decoder.py"


def _module(model):
    ns: dict = {}
    exec(compile(emit_torch(compile_graph(str(model))), f"<{model.name}>", "exec"), ns)
    return ns["Model"]()


@pytest.mark.parametrize(
    "model,want",
    [
        (LM, {"emb/W": (7, 5), "logits/b": (7,), "proj/W": (5, 4)}),
        (
            DECODER,
            {"enc/W": (6, 5), "enc/b": (5,), "emb/W": (7, 5), "logits_2/rec/s/W": (5, 5), "logits_2/rec/out/b": (7,)},
        ),
    ],
)
def test_returnn_has_one_variable(model, want):
    """RETURNN builds (and trains, in the decoder's rec unit as well) the tied weight as the one
    variable of its owner; the tying layer adds only its bias."""
    params, trainable, every = returnn_variables(emit_returnn(compile_graph(str(model))), train=True)
    assert params == want
    assert trainable == every == set(want)


def test_torch_state_dict_has_one_key():
    mod = _module(LM)
    assert sorted(mod.state_dict()) == ["emb.W", "logits.b", "proj.W"]
    assert sorted(n for n, _ in mod.named_parameters()) == ["emb.W", "logits.b", "proj.W"]


def test_torch_gradient_comes_from_both_uses():
    """One optimiser step on the LM's loss: the embedding's weight gets the embedding's gradient
    plus the output layer's (rows of labels the batch never reads change too), as the same
    model written out in plain torch with one tensor used twice."""
    torch.manual_seed(0)
    mod = _module(LM)
    y = torch.tensor([[1, 2, 3, 1], [2, 2, 0, 0]])
    z = torch.zeros_like(y)
    lens = torch.tensor([4, 2])
    W = mod.emb.W.detach().clone().requires_grad_()
    b = mod.logits.b.detach().clone().requires_grad_()
    h = torch.tanh(torch.nn.functional.embedding(y, W))
    ce = torch.nn.functional.cross_entropy(torch.nn.functional.linear(h, W, b).transpose(1, 2), y, reduction="none")
    mask = torch.arange(4)[None, :] < lens[:, None]
    (ce * mask).sum().backward()
    mod(y, z, lens)["ce"].backward()
    assert torch.allclose(mod.emb.W.grad, W.grad, atol=1e-6)
    unread = [v for v in range(7) if v not in {1, 2, 3}]
    assert mod.emb.W.grad[unread].abs().min() > 0  # only the output layer reads these rows
    before = mod.emb.W.detach().clone()
    torch.optim.SGD(mod.parameters(), lr=0.1).step()
    assert not torch.equal(before[unread], mod.emb.W.detach()[unread])


HEADER = """from netc import Dim, Embedding, Labels, Linear, Tensor, batch, network

time = Dim("time")
vocab = Dim("vocab", 7)
model = Dim("model", 5)
wide = Dim("wide", 6)


@network
def f(y: Labels[batch, time, vocab], x: Tensor[batch, time, wide]):
"""

ERRORS = [
    (
        ["emb = Embedding(model)", "e = emb(y)", "return Linear(vocab, weight=emb.weight)(x)"],
        "`Linear`'s weight would be [wide, vocab] but `emb.weight` is [vocab, model]: a shared parameter needs the same dims",
        3,
        "Linear(vocab",
    ),
    (
        ["emb = Embedding(model)", "out = Linear(vocab, weight=emb.weight)", "h = out(x)", "return emb(y)"],
        "`emb.weight` is used before `emb` is called: its shape comes from its first call",
        3,
        "out(x)",
    ),
    (
        ["lin = Linear(model)", "h = lin(x)", "return Linear(vocab, weight=lin)(h)"],
        "`Linear(..., weight=...)` takes another module's parameter, e.g. `emb.weight`, got module `lin`",
        3,
        "Linear(vocab",
    ),
    (
        ["emb = Embedding(model)", "out = Linear(vocab)", "out.weight = emb.weight", "return out(emb(y))"],
        "a module's parameters are fixed at its construction: tie them there, `out = Linear(..., weight=emb.weight)`",
        3,
        "out.weight",
    ),
    (
        ["emb = Embedding(model)", "e = emb(y)", "return Linear(vocab, weight=emb.bias)(e)"],
        "module `emb` has no attribute `bias`",
        3,
        "emb.bias",
    ),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_tie_errors_are_located(tmp_path, case):
    body, message, line, call = ERRORS[case]
    src = HEADER + "".join(f"    {b}\n" for b in body)
    path = tmp_path / "m.py"
    path.write_text(src)
    proc = run_netc("compile", path)
    header_lines = HEADER.count("\n")
    assert_located_error(proc, src, str(path), header_lines + line, call, message)
