"""`netc export`: the real CLI writes a file, which runs outside netc (onnxruntime, TorchScript,
torch.export) on a padded batch of another size and padded length than the export's example
(3 sequences of at most 5 frames) and gives the torch module's results on valid frames."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from conftest import EXAMPLES, ROOT, assert_located_error, example_network, run_netc

from netc.compiler import compile_graph
from netc.ir.model import Loop
from netc.passes.pipeline import PassOptions
from netc_runtime.backends import valid_mask
from netc_runtime.export import build, example_inputs
from netc_runtime.verify import random_params

# torch 2.13 deprecates TorchScript (for torch.export), which it still runs as before
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")

MODELS = ROOT / "tests" / "models"


def _reference(g, inputs, search=False, params=None, seed=0):
    """The torch module's results (losses left out) with the parameters `netc export` gives it."""
    wrapped, sig = build(g, params, seed, search, as_dict=True)
    with torch.no_grad():
        out = wrapped(**{k: torch.as_tensor(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}, sig


def _compare(g, sig, inputs, ref, got):
    lens = {d: inputs[f"{d}_lens"] for d in sig.dyn}
    lens.update({d.name: ref[f"{d.name}_lens"] for d in g.dims if f"{d.name}_lens" in ref})
    assert set(got) == {n for n, _ in sig.outputs}
    for name, dims in sig.outputs:
        r, o = ref[name], got[name]
        assert o.shape == r.shape and o.dtype == r.dtype, name
        valid = valid_mask(dims, lens, g, r.shape) if dims else np.ones(r.shape, dtype=bool)
        assert valid.any(), name
        assert float(np.abs(r.astype(np.float64) - o.astype(np.float64))[valid].max()) <= 1e-4, name


def _run_onnx(path, inputs) -> dict[str, np.ndarray]:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}  # labels only a loss reads are no input
    return dict(zip(names, session.run(names, {k: v for k, v in inputs.items() if k in wanted})))


# every example (a file with several networks: its first, the training network), the searches
# of the examples with `choice`, and test models for what the examples leave out
CASES = [(path, example_network(path), False) for path in sorted(EXAMPLES.glob("*.py"))] + [
    (EXAMPLES / "beam_search.py", None, True),
    (EXAMPLES / "librispeech_2018.py", None, True),
    (EXAMPLES / "conformer_transducer.py", "conformer_transducer_search", True),
    # a decoder growing self-attention states (cum_concat): buffers as long as its step limit
    (EXAMPLES / "conformer_aed.py", "conformer_aed", True),
    (MODELS / "end_bounded.py", None, False),  # a loop with `end`: a while loop making a dim, its lengths
    (MODELS / "fuse_gru_forms.py", None, False),  # fused GRUs (packed in the module): ONNX GRUs over the padded batch
    (MODELS / "grow_decoder.py", None, True),
]


def _case_id(case) -> str:
    path, network, search = case
    return f"{network or path.stem}{'-search' if search else ''}"


@pytest.mark.parametrize("path,network,search", CASES, ids=map(_case_id, CASES))
def test_onnx_runs_with_another_batch_and_length(tmp_path, path, network, search):
    out = tmp_path / "model.onnx"
    args = [*(["--network", network] if network else []), *(["--search"] if search else [])]
    proc = run_netc("export", path, "--format", "onnx", "-o", out, *args, check=True)
    assert proc.stdout.startswith(f"wrote {out} (onnx): (") and "checked: batch 4" in proc.stdout, proc.stdout
    g = compile_graph(str(path), network=network)
    model = onnx.load(str(out))
    graph_inputs, graph_outputs = _declared(model.graph.input), _declared(model.graph.output)
    assert all(dims[0] == "batch" for dims in graph_inputs.values()), graph_inputs
    # the line says the graph's own inputs and outputs, with their declared shapes
    assert proc.stdout.splitlines()[0] == f"wrote {out} (onnx): ({_show(graph_inputs)}) -> ({_show(graph_outputs)})"
    # a loop over time is an ONNX Loop, or a fused one an ONNX LSTM or GRU, not unrolled
    kinds = _op_types(model.graph)
    looped = compile_graph(str(path), network=network, options=PassOptions(fuse=False)).body
    assert bool(kinds & {"Loop", "LSTM", "GRU"}) == any(isinstance(n, Loop) for n in looped), kinds
    assert "GRU" in kinds or path.name != "fuse_gru_forms.py", kinds
    sig = build(g, search=search)[1]
    for batch, max_len in ((6, 9), (1, 2)):
        inputs = example_inputs(g, sig, batch, max_len, seed=batch)
        ref, sig = _reference(g, inputs, search)
        got = _run_onnx(out, inputs)
        _compare(g, sig, inputs, ref, got)
        _assert_shapes_as_declared(graph_inputs, graph_outputs, inputs, got)


def _op_types(graph) -> set[str]:
    """The graph's node kinds, those of its subgraphs (an `If`'s branches, a `Loop`'s body) too."""
    kinds = set()
    for n in graph.node:
        kinds.add(n.op_type)
        for a in n.attribute:
            for sub in [a.g] if a.HasField("g") else list(a.graphs):
                kinds |= _op_types(sub)
    return kinds


def _declared(values) -> dict[str, list[str | int]]:
    """An ONNX graph's inputs or outputs: name -> declared dims (a size, or a dim's name)."""
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}


def _show(values: dict[str, list[str | int]]) -> str:
    return ", ".join(f"{n}[{', '.join(map(str, dims))}]" for n, dims in values.items())


def _assert_shapes_as_declared(declared_in, declared_out, inputs, got) -> None:
    """Every tensor of a run has its declared shape: each size where one is declared, and the
    same size wherever a dim's name is (the inputs' sizes bind them first)."""
    bound: dict[str, int] = {}
    for kind, declared, arrays in (("input", declared_in, inputs), ("output", declared_out, got)):
        for name, dims in declared.items():
            shape = arrays[name].shape
            assert len(shape) == len(dims), (kind, name, dims, shape)
            for d, n in zip(dims, shape):
                assert n == (d if isinstance(d, int) else bound.setdefault(d, n)), (kind, name, dims, shape)


def test_the_signature_is_the_graphs(tmp_path):
    """A target only a loss reads is no input of the ONNX graph, and an output named as an input
    (a state passed in and returned) is `<name>_out` there: the lines say both."""
    (tmp_path / "m.py").write_text((MODELS / "state_in_out.py").read_text())
    proc = run_netc("export", "m.py", "--format", "onnx", "-o", "m.onnx", cwd=tmp_path, check=True)
    assert proc.stdout.splitlines()[:3] == [
        "wrote m.onnx (onnx): (x[batch, time, 4], s[batch, 4], time_lens[batch]) -> (out[batch, time, 4], s_out[batch, 4])",
        "note: the result `s` is `s_out` in the file (an input has its name)",
        "note: `y`, `label_time_lens` are not inputs of the file (nothing it computes reads them)",
    ], proc.stdout
    session = onnxruntime.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["x", "s", "time_lens"]
    assert [o.name for o in session.get_outputs()] == ["out", "s_out"]
    model = onnx.load(str(tmp_path / "m.onnx"))
    g = compile_graph(str(tmp_path / "m.py"))
    inputs = example_inputs(g, build(g)[1], 5, 6, seed=1)
    declared_in, declared_out = _declared(model.graph.input), _declared(model.graph.output)
    _assert_shapes_as_declared(declared_in, declared_out, inputs, _run_onnx(tmp_path / "m.onnx", inputs))


def test_params_file_as_netc_run_reads_it(tmp_path):
    g = compile_graph(str(EXAMPLES / "elman.py"))
    params = random_params(g, np.random.default_rng(7))
    np.savez(tmp_path / "p.npz", **{f"param:{k}": v for k, v in params.items()})
    out = tmp_path / "elman.onnx"
    run_netc("export", EXAMPLES / "elman.py", "--format", "onnx", "--params", tmp_path / "p.npz", "-o", out, check=True)
    wrapped, sig = build(g, str(tmp_path / "p.npz"))
    assert torch.equal(wrapped.model.h.W, torch.as_tensor(params["out/rec/h/W"]))
    inputs = example_inputs(g, sig, 4, 8, seed=3)
    ref, sig = _reference(g, inputs, params=str(tmp_path / "p.npz"))
    _compare(g, sig, inputs, ref, _run_onnx(out, inputs))
    other, _ = _reference(g, inputs)  # the random parameters of --seed 0 give other results
    assert not np.allclose(other["output"], ref["output"])


def test_torchscript_and_torch_export(tmp_path):
    """TorchScript keeps loops (any length); torch.export too, as torch's `scan`."""
    cases = [
        (EXAMPLES / "elman.py", "torchscript", "m.pt"),
        (MODELS / "ops_argmax.py", "torch-export", "m.pt2"),
        (EXAMPLES / "attention.py", "torch-export", "a.pt2"),
    ]
    for path, fmt, name in cases:
        out = tmp_path / name
        run_netc("export", path, "--format", fmt, "-o", out, check=True)
        g = compile_graph(str(path))
        inputs = example_inputs(g, build(g)[1], 5, 9, seed=5)
        ref, sig = _reference(g, inputs)
        module = torch.jit.load(str(out)) if fmt == "torchscript" else torch.export.load(str(out)).module()
        with torch.no_grad():
            got = module(**{k: torch.as_tensor(v) for k, v in inputs.items()})
        _compare(g, sig, inputs, ref, {k: v.numpy() for k, v in got.items()})


def test_refusals_are_located_errors(tmp_path):
    src = (MODELS / "grow_decoder.py").read_text()
    (tmp_path / "grow.py").write_text(src)
    proc = run_netc("export", "grow.py", "--format", "torch-export", "-o", "m.pt2", cwd=tmp_path)
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "cum_concat(keys" in text)
    assert_located_error(
        proc, src, "grow.py", line, "nc.cum_concat(keys", "torch-export: `cum_concat` grows a state in a loop"
    )
    assert "which neither torch's `scan` nor its `while_loop` runs; use --format onnx or torchscript" in proc.stderr
    # a beam search runs as torch's while_loop, its steps written into buffers as long as its limit
    src = (EXAMPLES / "beam_search.py").read_text().replace("for _ in range(2 * x.max_seq_len):", "while True:")
    (tmp_path / "beam.py").write_text(src)
    proc = run_netc("export", "beam.py", "--format", "torch-export", "--search", "-o", "m.pt2", cwd=tmp_path)
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "while True" in text)
    assert_located_error(proc, src, "beam.py", line, "while True", "torch-export: this beam search has no step limit")
    # ONNX: a state grown in a beam search with no step limit (no buffer length)
    src = (MODELS / "grow_decoder.py").read_text().replace("for _ in range(x.max_seq_len + 2):", "while True:")
    (tmp_path / "grow.py").write_text(src)
    proc = run_netc("export", "grow.py", "--format", "onnx", "--search", "-o", "m.onnx", cwd=tmp_path)
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "cum_concat(keys" in text)
    assert_located_error(
        proc, src, "grow.py", line, "nc.cum_concat(keys", "--format onnx: `cum_concat` grows a state in a beam search"
    )
    src = (MODELS / "ops_losses.py").read_text()
    (tmp_path / "losses.py").write_text(src)
    proc = run_netc("export", "losses.py", "--format", "onnx", "-o", "m.onnx", cwd=tmp_path)
    assert_located_error(
        proc, src, "losses.py", 32, "ctc_loss(", "--format onnx: ONNX has no CTC loss operator (`ctc_loss`"
    )
    src = (MODELS / "ctc_decoding.py").read_text()
    (tmp_path / "decoding.py").write_text(src)
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "lm_labels, lm_score = ctc_prefix_search(" in text)
    for fmt in ("onnx", "torch-export"):
        proc = run_netc("export", "decoding.py", "--format", fmt, "-o", "m.onnx", cwd=tmp_path)
        why = f"--format {fmt}: CTC decoding gives a number of labels that depends on values"
        assert_located_error(proc, src, "decoding.py", line, "ctc_prefix_search(", why)
    assert not (tmp_path / "m.onnx").exists() and not (tmp_path / "m.pt2").exists()


def test_failures_are_one_line(tmp_path):
    np.savez(tmp_path / "p.npz", **{"param:nope": np.zeros(3)})
    proc = run_netc("export", EXAMPLES / "elman.py", "--format", "onnx", "--params", tmp_path / "p.npz", "-o", "m.onnx")
    message = f"error: {tmp_path / 'p.npz'}: unknown parameter 'nope'"
    assert proc.returncode == 1 and proc.stderr.startswith(message), proc.stderr
    proc = run_netc("export", EXAMPLES / "elman.py", "--format", "onnx", "--search", "-o", tmp_path / "m.onnx")
    assert proc.returncode == 1 and proc.stderr == "error: elman has no `choice`: there is nothing to search\n"
