"""The IR (verifier, JSON, printer) and each pass on its own."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT, example_network

from netc.emit_tf import bound_ops
from netc.emit_tf.decisions import check as check_returnn
from netc.emit_tf.decisions import decisions as returnn_decisions
from netc.emit_torch import padded_steps, torch_addmm
from netc.emit_torch.decisions import check as check_torch
from netc.emit_torch.decisions import decisions as torch_decisions
from netc.ir.json import graph_from_json, graph_to_json
from netc.ir.model import Graph, Loop, Op
from netc.ir.printer import print_graph
from netc.ir.verify import IRError, verify
from netc.ir.walk import loop_key
from netc.parser import parse_file
from netc.passes import dce, hoist_frames, hoist_invariants, rec_state
from netc.passes.pipeline import PassOptions, run_passes
from netc_runtime.backends import run_torch
from netc_runtime.verify import random_inputs, random_lengths, random_params

HEADER = """\
from netc import Dim, Linear, Tensor, batch, network, tanh, zeros, dropout
time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)
"""


def _parse(tmp_path, body: str) -> Graph:
    path = tmp_path / "m.py"
    path.write_text(HEADER + textwrap.dedent(body))
    return parse_file(str(path))


def _loops(g: Graph) -> list[Loop]:
    return [n for n in g.body if isinstance(n, Loop)]


@pytest.mark.parametrize("model", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_graph_round_trips_through_json_and_verifies(model):
    g = run_passes(parse_file(str(EXAMPLES / model), network=example_network(EXAMPLES / model)))
    again = graph_from_json(graph_to_json(g))
    assert again == g
    verify(again)
    # the JSON holds the shared IR, not the targets' decisions (`Graph.lowerings`)
    assert not again.lowerings and g.lowerings
    for graph in (g, g.search) if g.search is not None else (g,):
        graph.lowerings.clear()
    assert print_graph(again) == print_graph(g)


def test_verifier_rejects_use_before_definition(tmp_path):
    g = parse_file(str(EXAMPLES / "elman.py"))
    loop = _loops(g)[0]
    op = next(n for n in loop.body if isinstance(n, Op))
    op.args = [10_000]
    with pytest.raises(IRError, match="not defined in its block"):
        verify(g)


def test_verifier_rejects_undeclared_dims_and_double_definitions():
    g = parse_file(str(EXAMPLES / "elman.py"))
    first = next(n for n in g.body if isinstance(n, Op))
    first.outs[0].dims = ("batch", "nope")
    with pytest.raises(IRError, match="undeclared dim nope"):
        verify(g)
    g = parse_file(str(EXAMPLES / "elman.py"))
    ops = [n for n in _loops(g)[0].body if isinstance(n, Op)]
    ops[1].outs[0].id = ops[0].outs[0].id
    with pytest.raises(IRError, match="defined twice"):
        verify(g)


def test_rec_state_keeps_only_values_read_before_assignment(tmp_path):
    g = _parse(
        tmp_path,
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            y = zeros(batch, hidden)
            out = []
            for x_t in x:
                y = tanh(Linear(hidden)(x_t))   # assigned before any read: not state
                h = tanh(Linear(hidden)(y) + h)  # read, then assigned: state
                out.append(h)
            return {"output": out, "y": y, "h": h}
        """,
    )
    assert {c.name for c in _loops(g)[0].carries} == {"h", "y"}  # the parser carries every reassigned name
    g2, changed = rec_state.transform(g)
    loop = _loops(g2)[0]
    assert changed
    assert [c.name for c in loop.carries] == ["h"]
    assert "y" in {ll.name for ll in loop.lasts}
    verify(g2)


def test_rec_state_turns_an_unchanged_carry_into_an_invariant(tmp_path):
    g = _parse(
        tmp_path,
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            out = []
            for x_t in x:
                h = h
                out.append(Linear(hidden)(x_t) + h)
            return {"output": out, "h": h}
        """,
    )
    g2, _ = rec_state.transform(g)
    loop = _loops(g2)[0]
    assert loop.carries == [] and len(loop.invariants) == 1
    zeros_id = next(n for n in g2.body if isinstance(n, Op)).outs[0].id
    assert next(o.value for o in g2.outputs if o.name == "h") == zeros_id
    verify(g2)


def test_dce_drops_unused_ops_loop_results_and_their_parameters(tmp_path):
    g = _parse(
        tmp_path,
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            unused = Linear(hidden)(x)
            h = zeros(batch, hidden)
            for x_t in x:
                h = tanh(Linear(hidden)(x_t) + h)
            return h
        """,
    )
    assert {p.name for p in g.params} == {"unused/W", "unused/b", "h/W", "h/b"}
    g2, changed = dce.transform(rec_state.transform(g)[0])
    assert changed
    assert {p.name for p in g2.params} == {"h/W", "h/b"}
    assert all(n.op != "linear" or n.param != "unused" for n in g2.body if isinstance(n, Op))
    assert _loops(g2)[0].lasts == []  # x_t's last frame was never read
    verify(g2)


def test_hoist_moves_invariant_and_per_frame_work_but_not_dropout_as_an_invariant(tmp_path):
    """Dropout of a frame may run over the whole sequence (each frame gets its own mask either
    way); dropout of an invariant stays (once before the loop, every step would share one mask)."""
    g = _parse(
        tmp_path,
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            out = []
            for x_t in x:
                bias = zeros(batch, hidden) + 1.0              # invariant
                x_lin = Linear(hidden)(x_t)                    # per frame
                h = tanh(Linear(hidden)(dropout(x_lin, 0.1) + h) + dropout(bias, 0.2))
                out.append(h)
            return out
        """,
    )
    g = dce.transform(rec_state.transform(g)[0])[0]
    g2, changed = hoist_invariants.transform(g)
    assert changed
    g2, changed = hoist_frames.transform(g2)
    assert changed
    before = [n.op for n in g2.body if isinstance(n, Op)]
    assert "linear" in before and "zeros" in before and "add" in before
    x_lin = next(n for n in g2.body if isinstance(n, Op) and n.param == "x_lin")
    assert x_lin.outs[0].dims == ("batch", "time", "hidden")  # computed over whole sequences
    inside = [n for n in _loops(g2)[0].body if isinstance(n, Op)]
    assert [n.attrs["p"] for n in inside if n.op == "dropout"] == [0.2]  # the invariant's
    assert [n.attrs["p"] for n in g2.body if isinstance(n, Op) and n.op == "dropout"] == [0.1]  # the frames'
    assert "zeros" not in [n.op for n in inside]
    verify(g2)


@pytest.mark.parametrize("model", ["elman.py", "bidirectional.py", "nested.py", "attention.py"])
def test_hoisting_changes_no_number(model):
    """The torch module with and without the hoisting passes gives the same outputs."""
    path = str(EXAMPLES / model)
    plain = run_passes(parse_file(path), PassOptions(hoist=False))
    hoisted = run_passes(parse_file(path))
    assert print_graph(plain) != print_graph(hoisted)
    rng = np.random.default_rng(0)
    lens = random_lengths(plain, 3, 6, rng)
    inputs, params = random_inputs(plain, lens, rng), random_params(plain, rng)
    # RETURNN names depend on where layers stand; the module path does not
    by_path = {(p.path, p.role): params[p.name] for p in plain.params}
    hoisted_params = {p.name: by_path[(p.path, p.role)] for p in hoisted.params}
    a, b = run_torch(plain, inputs, lens, params), run_torch(hoisted, inputs, lens, hoisted_params)
    for name in a.outputs:
        np.testing.assert_allclose(a.outputs[name], b.outputs[name], atol=1e-5)


def test_verify_comparison_sees_differences_on_valid_frames_only():
    """The oracle's comparison: a change on a valid frame shows, one on a padded frame does not."""
    from netc_runtime.backends import Result
    from netc_runtime.verify import compare

    g = run_passes(parse_file(str(EXAMPLES / "elman.py")))
    lens = {"time": np.array([3, 1])}
    out = np.zeros((2, 3, 32), np.float32)
    ref = Result(
        {"output": out, "last": np.zeros((2, 32), np.float32)},
        {"output": ["batch", "time", "hidden"], "last": ["batch", "hidden"]},
        {"output": {"time": lens["time"]}, "last": {}},
    )
    padded = out.copy()
    padded[1, 2] = 5.0  # sequence 1 has one frame: frame 2 is padding
    valid = out.copy()
    valid[0, 2] = 5.0
    for changed, want in ((padded, 0.0), (valid, 5.0)):
        other = Result({"output": changed, "last": ref.outputs["last"]}, ref.dims, ref.lens)
        diffs = {c.output: c.max_abs_diff for c in compare(g, ref, other, "x")}
        assert diffs == {"output": want, "last": 0.0}
    nan = out.copy()
    nan[0, 0, 0] = np.nan
    other = Result({"output": nan, "last": ref.outputs["last"]}, ref.dims, ref.lens)
    assert compare(g, ref, other, "x")[0].max_abs_diff == float("inf")


def test_padded_steps_freezes_backward_states_and_takes_forward_ones_from_their_stacks():
    g = run_passes(parse_file(str(EXAMPLES / "bidirectional.py")))
    fw, bw = _loops(g)
    t = torch_decisions(g)
    (h,), (h_stack,) = fw.carries, fw.stacks
    assert not t.frozen_state(h) and t.stack_of(h) == h_stack.out.id  # runs on; read after the loop from its stack
    (state,) = bw.carries
    assert t.frozen_state(state) and t.stack_of(state) is None  # a backward loop runs its padded steps first
    assert padded_steps.transform(g) == (g, False)  # recomputed: the same decisions
    del t.from_stack[h.out.id]
    t.frozen.add(h.inner.id)
    assert padded_steps.transform(g)[1] and t.stack_of(h) == h_stack.out.id and not t.frozen_state(h)


def test_padded_steps_keeps_int_states_frozen(tmp_path):
    g = _parse(
        tmp_path,
        """
        from netc import argmax, maximum
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            k = argmax(h, axis=hidden)
            out = []
            ks = []
            for x_t in x:
                h = tanh(Linear(hidden)(x_t) + h)
                k = maximum(k, argmax(h, axis=hidden))
                out.append(h)
                ks.append(k)
            return {"output": out, "ks": ks, "h": h, "k": k}
        """,
    )
    g = run_passes(g)
    loop, t = _loops(g)[0], torch_decisions(g)
    # both are stacked and read after the loop; an int state may count or index: kept frozen
    assert {c.name: (t.frozen_state(c), t.stack_of(c) is not None) for c in loop.carries} == {
        "h": (False, True),
        "k": (True, True),
    }


def test_torch_addmm_takes_a_bias_less_linear_read_only_by_the_add(tmp_path):
    g = run_passes(parse_file(str(EXAMPLES / "bidirectional.py")))
    for loop in _loops(g):
        add = next(n for n in loop.body if isinstance(n, Op) and n.op == "add")
        operand = torch_decisions(g).addmm_operand(add)
        linear = next(n for n in loop.body if isinstance(n, Op) and n.outs[0].id == operand)
        assert linear.op == "linear" and not linear.attrs["with_bias"]
    g = _parse(
        tmp_path,
        """
        @network
        def f(x: Tensor[batch, time, feat]):
            h = zeros(batch, hidden)
            out = []
            for x_t in x:
                p = Linear(hidden, with_bias=False)(h)
                h = tanh(Linear(hidden)(x_t) + p) * p  # the linear is read twice
                out.append(h)
            return {"output": out}
        """,
    )
    g = run_passes(g, PassOptions(hoist=False))
    assert not torch_decisions(g).addmm
    assert torch_addmm.transform(g) == (g, False)


def test_bound_ops_run_in_a_search_graphs_loop_only():
    g = run_passes(parse_file(str(EXAMPLES / "beam_search.py")))
    (loop,) = _loops(g.search)
    made = {n.outs[0].id: n for n in g.search.body if isinstance(n, Op)}
    ops = returnn_decisions(g.search).bound_ops_of(loop)
    assert ops and loop.bound == ops[-1]
    assert all(made[i].outs[0].id == i for i in ops)
    assert not returnn_decisions(g).bound_ops  # training's loop has no bound
    assert bound_ops.transform(g.search) == (g.search, False)


def test_targets_check_their_recorded_decisions_name_what_they_refer_to():
    g = run_passes(parse_file(str(EXAMPLES / "bidirectional.py")))
    fw, t = _loops(g)[0], torch_decisions(g)
    add = next(n for n in fw.body if isinstance(n, Op) and n.op == "add")
    t.addmm[add.outs[0].id] = add.args[0]  # a frame, not a linear
    with pytest.raises(IRError, match="torch_addmm"):
        check_torch(g)
    del t.addmm[add.outs[0].id]
    t.from_stack[fw.carries[0].out.id] = fw.carries[0].out.id  # not a stack
    with pytest.raises(IRError, match="not taken from a stack"):
        check_torch(g)
    del t.from_stack[fw.carries[0].out.id]
    check_torch(g)
    returnn_decisions(g).bound_ops[loop_key(fw)] = [fw.seqs[0].outer]  # the loop has no bound
    with pytest.raises(IRError, match="bound ops"):
        check_returnn(g)


def test_verify_compares_a_loss_relative_to_its_size():
    """A loss sums every valid frame of the batch, so its float32 rounding grows with it: 1.8e-4
    on a loss of 715 is rounding (found by the random-program tester), on a value it is a bug."""
    from netc_runtime.backends import Result
    from netc_runtime.verify import compare

    g = run_passes(parse_file(str(ROOT / "tests" / "models" / "losses.py")))
    names = [o.name for o in g.outputs]
    loss = g.losses[0].name
    dims = {n: ["batch"] for n in names} | {loss: []}
    lens = {n: {} for n in dims}

    def result(loss_value: float, value: float) -> Result:
        outs = {n: np.full((2,), value, np.float32) for n in names} | {loss: np.float32(loss_value)}
        return Result(outs, dims, lens)

    comps = {c.output: c for c in compare(g, result(715.0, 0.0), result(715.00018, 1.8e-4), "x")}
    assert comps[loss].ok and comps[loss].scale == 715.0
    assert all(not comps[n].ok and comps[n].scale == 1.0 for n in names)
    assert not compare(g, result(715.0, 0.0), result(715.2, 0.0), "x")[-1].ok  # 2.8e-4 relative
