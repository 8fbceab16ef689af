"""`netc export`: the emitted torch module, with parameters, as a file to deploy without netc.

Inference only: the exported forward takes the inputs and `<dim>_lens` (a search: the inputs a
search takes) and returns the network's outputs and the lengths of dims its loops made, no
losses. Batch and dynamic dims stay dynamic. Formats:

- `torchscript`: `torch.jit.script` of a wrapper that returns a dict; loops stay loops.
- `onnx`: that scripted wrapper through torch's TorchScript-based ONNX exporter, which writes a
  scripted loop as an ONNX `Loop` whose trip count is the padded length (`torch.onnx.export(...,
  dynamo=True)` goes through `torch.export`, which unrolls a Python loop at the example's length).
  Where ONNX needs another form, the module exported differs from the default one, with the
  same results on valid frames: a fused GRU runs over the padded batch (`_padded_grus`), and a
  search's states grown by `cum_concat` are buffers as long as its step limit (`_buffered_search`).
- `torch-export`: `torch.export.export` of the wrapper (not scripted) of the module emitted with
  `--loops scan`: its loops are torch's `scan` operator, which export keeps a loop of any length,
  and a loop with `end` and a step limit (a search's beam loop too) its `while_loop`; a loop that
  cannot be one is refused.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from netc.ir.interface import input_dyn_dims, interface
from netc.ir.model import Graph, Loop, Op
from netc.ir.search import BATCH_SIZE, SCORES, search_dims, search_plan
from netc.ir.uses import node_uses, values_by_id
from netc.naming import lens_name
from netc.outputs import write_bytes
from netc.passes.inference import inference_graph
from netc_runtime.backends import load_torch_module, valid_mask
from netc_runtime.failures import Mismatch, failing_as
from netc_runtime.npz import _params
from netc_runtime.scratch import scratch_file
from netc_runtime.verify import TOLERANCE, made_lengths, random_inputs, random_lengths

FORMATS = ("onnx", "torchscript", "torch-export")
OPSET = 17  # onnxruntime 1.16 and later run it


@dataclass(frozen=True)
class Signature:
    """What the exported forward takes and returns, in order, with each tensor's dims."""

    inputs: list[tuple[str, list[str]]]  # argument -> dims ("batch", dim names)
    outputs: list[tuple[str, list[str]]]  # result -> dims
    dyn: list[str]  # dynamic input dims (each has a lengths input)
    search: bool
    # where the file differs (ONNX): the inputs it does not take (nothing it computes reads them),
    # and results named otherwise there (result -> its name there)
    left_out: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)


def signature(g: Graph, search: bool = False) -> Signature:
    """The inputs (then `<dim>_lens` per dynamic input dim) and results (outputs, then
    `<dim>_lens` of made dims; a search: its stacked outputs, `<axis>_lens` and `scores`)."""
    if search:
        plan = search_plan(g)
        if plan is None:
            raise ValueError(f"{g.network} has no `choice`: there is nothing to search")
        names, dyn = set(plan.inputs), list(plan.input_dims)
        out_dims = search_dims(g)
        scores = out_dims.pop(SCORES)
        outputs = [(k, v) for k, v in out_dims.items()] + [(key, ["batch"]) for key in plan.made_lens.values()]
        outputs.append((SCORES, scores))
    else:
        iface, values = interface(g), values_by_id(g)
        names, dyn = set(iface.inputs), input_dyn_dims(g)
        outputs = [(o.name, list(values[o.value].dims)) for o in g.outputs]
        outputs += [(lens, ["batch"]) for lens in iface.made_lens.values()]
    inputs = [(i.name, [d for d in i.annotated_dims if d != i.value.sparse_dim]) for i in g.inputs if i.name in names]
    inputs += [(lens_name(d), ["batch"]) for d in dyn]
    if search and not inputs:  # a search that takes no input: its batch size, an int64 scalar
        inputs = [(BATCH_SIZE, [])]
    return Signature(inputs, outputs, dyn, search)


def _wrapper_source(g: Graph, sig: Signature, as_dict: bool) -> str:
    """A module around the emitted one whose forward takes the inputs and returns the results."""
    args = ", ".join(f"{n}: torch.Tensor" for n, _ in sig.inputs)
    if sig.search and [n for n, _ in sig.inputs] == [BATCH_SIZE]:
        call = f"self.model.search(int({BATCH_SIZE}))"
    elif sig.search:
        call = f"self.model.search({', '.join(n for n, _ in sig.inputs)})"
    else:
        call = f"self.model({', '.join(f'{n}={n}' for n, _ in sig.inputs)})"
    if as_dict:
        ret, items = "dict[str, torch.Tensor]", ", ".join(f"{n!r}: out[{n!r}]" for n, _ in sig.outputs)
        body = f"return {{{items}}}"
    else:
        ret = f"tuple[{', '.join('torch.Tensor' for _ in sig.outputs)}]"
        body = f"return {', '.join(f'out[{n!r}]' for n, _ in sig.outputs)},"
    return (
        f'"""`{g.network}` for inference: inputs in, outputs (and lengths) out, no losses."""\n\n'
        "import torch\n\n\n"
        "class Exported(torch.nn.Module):\n"
        "    def __init__(self, model: torch.nn.Module):\n"
        "        super().__init__()\n"
        "        self.model = model\n\n"
        f"    def forward(self, {args}) -> {ret}:\n"
        f"        out = {call}\n"
        f"        {body}\n"
    )


def _import(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(g: Graph, params_path: str | None = None, seed: int = 0, search: bool = False, as_dict: bool = False):
    """The wrapped module in evaluation mode with its parameters (`--params` npz with
    `param:<RETURNN name>`, as `netc run` reads it, the others drawn from `seed` as there), and
    its signature."""
    params = _params(g, params_path, None, seed)  # drawn for the whole model, as `netc run` does
    g = inference_graph(g)
    model = load_torch_module(g).Model()
    model.load_returnn_params({k: v for k, v in params.items() if k in model.returnn_param_names})
    sig = signature(g, search)
    path = scratch_file(f"{g.network}_export_{'dict' if as_dict else 'tuple'}.py", _wrapper_source(g, sig, as_dict))
    wrapped = _import(path, "netc_export").Exported(model).eval()
    for p in wrapped.parameters():
        p.requires_grad_(False)
    return wrapped, sig


def example_inputs(g: Graph, sig: Signature, batch: int, max_len: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A padded batch with unequal lengths, as `netc verify` draws it, restricted to `sig`'s inputs."""
    rng = np.random.default_rng(seed)
    lens = random_lengths(g, batch, max_len, rng)
    arrays = {**random_inputs(g, lens, rng, batch), **{lens_name(d): v.astype(np.int64) for d, v in lens.items()}}
    arrays[BATCH_SIZE] = np.asarray(batch, dtype=np.int64)
    return {n: arrays[n] for n, _ in sig.inputs}


def _example(g: Graph, sig: Signature, seed: int) -> dict[str, np.ndarray]:
    """The batch of 3 that tracing runs on, its dynamic dims padded to at least 2 frames, and
    those ops make from them (a downsampled time dim) too: torch.export fixes a dim whose
    example size is 0 or 1 (labels drawn to fit a downsampled time dim may have 1 frame at
    most at first, a search's encoder 1 frame; longer sequences are drawn then)."""
    for max_len in (5, 9, 17, 33, 65):
        inputs = example_inputs(g, sig, 3, max_len, seed)
        made = made_lengths(g, {d: inputs[lens_name(d)].tolist() for d in sig.dyn})
        if all(inputs[n].shape[ax] >= 2 for n, dims in sig.inputs for ax in _dynamic(g, dims)) and all(
            max(ls, default=2) >= 2 for ls in made.values()
        ):
            return inputs
    return inputs


def _dynamic(g: Graph, dims: list[str]) -> dict[int, str]:
    kinds = {d.name: d.kind for d in g.dims}
    return {ax: d for ax, d in enumerate(dims) if d == "batch" or kinds.get(d) == "dynamic"}


@contextlib.contextmanager
def _printed_as_note():
    """The TorchScript-based exporter prints its whole graph to the process' stdout when it fails
    (from C++): kept, and added to the exception as a note (`netc export --verbose` shows it)."""
    import os
    import sys
    import tempfile

    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile() as tmp:
        for fd in saved:
            os.dup2(tmp.fileno(), fd)
        try:
            yield
        except Exception as e:
            sys.stdout.flush()
            sys.stderr.flush()
            tmp.seek(0)
            printed = tmp.read().decode("utf-8", "replace").strip()
            if printed:
                e.add_note(f"the exporter printed:\n{printed}")
            raise
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy_ in saved.items():
                os.dup2(copy_, fd)
                os.close(copy_)


@contextlib.contextmanager
def _quiet():
    """torch 2.13 warns that TorchScript and the TorchScript-based ONNX exporter are deprecated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _refuse_loops(g: Graph, search: bool) -> None:
    """torch.export keeps a loop only as torch's `scan` or `while_loop` operator
    (`TorchDecisions.scan`, made with `--loops scan`): it would unroll a Python loop at the example's padded length (its
    dim could no longer vary). A search's beam loop runs as `while_loop` where it has a step
    limit (the steps' buffers are preallocated to it)."""
    from netc.emit_torch.lowering import lowered
    from netc.emit_torch.scan import beam_while
    from netc.emit_torch.scan_loops import loop_blocker
    from netc.errors import CompileError

    plan = search_plan(g) if search else None
    if plan is not None and not plan.inputs:
        raise CompileError(
            plan.loop.span,
            f"--format torch-export: this search takes no input, so its batch size is a number (`{BATCH_SIZE}`), "
            "which torch.export cannot keep dynamic; use --format onnx or torchscript",
        )
    g = g.search if search and g.search is not None else g
    low = lowered(g)
    for n in g.body:
        if isinstance(n, Loop) and search and low.scanned(n) and n.target is not None and not beam_while(low, n):
            raise CompileError(
                n.span,
                "--format torch-export: this beam search has no step limit (`range`), which torch's `while_loop` "
                "needs (the steps' buffers are preallocated to it); use --format onnx or torchscript",
            )
        if isinstance(n, Loop) and not low.scanned(n):
            span, why = loop_blocker(g, n) or (
                n.span,
                "this loop decides from values when to stop (a search)",
            )
            raise CompileError(
                span,
                f"--format torch-export: {why}, which neither torch's `scan` nor its `while_loop` runs; "
                "use --format onnx or torchscript",
            )


_CTC_DECODING = (
    "CTC decoding gives a number of labels that depends on values and searches in a Python loop over the "
    "frames, which {} would fix at the example's lengths; use --format torchscript"
)
_NO_ONNX = {  # ops whose torch code ONNX cannot express
    "ctc_loss": "ONNX has no CTC loss operator",
    "rnnt_loss": "ONNX has no RNN-T loss operator",
    "ctc_greedy": _CTC_DECODING.format("the traced graph"),
    "ctc_prefix_search": _CTC_DECODING.format("the traced graph"),
}
_NO_TORCH_EXPORT = {  # ops whose torch code torch.export cannot keep dynamic
    "ctc_greedy": _CTC_DECODING.format("torch.export"),
    "ctc_prefix_search": _CTC_DECODING.format("torch.export"),
}


def _refuse_ops(g: Graph, search: bool, fmt: str = "onnx") -> None:
    """An op the format has no form for (ONNX: no operator), that a result needs (losses are not
    exported; an output that is a per-sequence loss is; a search computes only what it returns)."""
    from netc.errors import CompileError

    g = inference_graph(g)
    if search and g.search is not None:
        g = g.search
    plan = search_plan(g) if search else None
    needed = {o.value for o in g.outputs if plan is None or o.name in plan.outputs}
    for n in reversed(g.body):
        if not any(v.id in needed for v in (n.results() if isinstance(n, Loop) else n.outs)):
            continue
        needed.update(node_uses(n))
        refused = _NO_ONNX if fmt == "onnx" else _NO_TORCH_EXPORT
        for op in _ops(n):
            if op.op in refused:
                raise CompileError(op.span, f"--format {fmt}: {refused[op.op]} (`{op.op}`, which a result needs)")


def _refuse_python(g: Graph, fmt: str) -> None:
    """An op whose torch code is Python no exporter captures (`OpDef.python_only`)."""
    from netc.errors import CompileError
    from netc.ops import REGISTRY

    for graph in (g, g.search) if g.search is not None else (g,):
        for n in graph.body:
            for op in _ops(n):
                why = REGISTRY[op.op].python_only
                if not why and op.regions:  # the op's functions are local functions of forward
                    names = ", ".join(f"`{r.name}`" for r in op.regions)
                    why = f"calls its functions ({names}) from a search in Python"
                if why:
                    raise CompileError(op.span, f"--format {fmt}: `{op.op}` {why}; run the torch module itself")


def _ops(n):
    if isinstance(n, Loop):
        for m in n.body:
            yield from _ops(m)
    else:
        yield n


def _padded_grus(g: Graph) -> Graph:
    """`g` with each fused GRU (`gru_loop`) over the padded batch, written as an ONNX `GRU`: by
    default it runs on a batch packed by its lengths, which the exporter cannot express. Valid
    frames come first and h is read at each sequence's last, so padding changes no result."""

    def grus(g: Graph) -> list:
        graphs = [g] if g.search is None else [g, g.search]
        return [op for graph in graphs for n in graph.body for op in _ops(n) if op.op == "gru_loop"]

    if not grus(g):
        return g
    g = copy.deepcopy(g)
    for op in grus(g):
        op.attrs["padded"] = True
    return g


def _buffered_search(g: Graph) -> Graph:
    """`g` with its beam search's states that `cum_concat` grows from `empty` (a decoder's
    self-attention keys and values) as buffers as long as the step limit, as `--loops scan`
    has them (`TorchDecisions.buffers`): a state growing from step to step, carried by an ONNX `Loop`,
    gave other results in onnxruntime than in torch (conformer_aed's labels)."""
    from netc.emit_torch.lowering import lowered
    from netc.emit_torch.scan_loops import search_buffers
    from netc.errors import CompileError

    unlimited = search_buffers(g)
    if isinstance(unlimited, Op):  # no length for a buffer: refused where the state grows
        raise CompileError(
            unlimited.span,
            f"--format onnx: `{unlimited.op}` grows a state in a beam search without a step limit (`range`), "
            "which an ONNX `Loop` carries with other results than torch's; give the loop a step limit",
        )
    if not unlimited:
        return g
    g = copy.deepcopy(g)  # the copy's decisions are copied with it
    lowered(g.search or g).buffers = True
    return g


def export(
    g: Graph,
    fmt: str,
    output: str,
    params_path: str | None = None,
    seed: int = 0,
    search: bool = False,
) -> Signature:
    """Write `g`'s module in format `fmt` to `output` and return the file's signature; the example
    inputs that tracing needs are a batch of 3 with unequal lengths (batch and dynamic dims stay
    dynamic)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    _refuse_python(g, fmt)
    if fmt == "torch-export":
        _refuse_ops(g, search, fmt)
        _refuse_loops(g, search)
    if fmt == "onnx":
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError as e:
            raise ValueError(
                f"--format onnx needs onnx and onnxruntime ({e.name} is missing): pip install 'netc[export]'"
            ) from e
        _refuse_ops(g, search)
        g = _padded_grus(g)
        if search:
            g = _buffered_search(g)
    import torch

    wrapped, sig = build(g, params_path, seed, search, as_dict=fmt != "onnx")
    example = {k: torch.as_tensor(v) for k, v in _example(g, sig, seed).items()}
    buffer = io.BytesIO()
    with _quiet(), torch.no_grad(), failing_as(fmt):
        if fmt == "torchscript":
            torch.jit.save(torch.jit.script(wrapped), buffer)
        elif fmt == "onnx":
            with _printed_as_note():
                taken = _onnx(g, sig, torch.jit.script(wrapped), example, buffer, torch)
            names = onnx_output_names(sig)
            left_out = [n for n, _ in sig.inputs if n not in taken]
            sig = replace(sig, left_out=left_out, renamed={n: o for o, (n, _) in zip(names, sig.outputs) if o != n})
        else:
            _torch_export(g, sig, wrapped, example, buffer, torch)
    write_bytes(output, buffer.getvalue())
    return sig


def onnx_output_names(sig: Signature) -> list[str]:
    """The results' names in the ONNX graph, where inputs and outputs share one name space: a
    result named as an input (a state passed in and returned, a search's lengths of an input's
    dim `time_lens`) is `<name>_out` there."""
    taken = {n for n, _ in sig.inputs}
    return [f"{n}_out" if n in taken else n for n, _ in sig.outputs]


def _onnx(g: Graph, sig: Signature, scripted, example, buffer, torch) -> set[str]:
    """Write the ONNX graph to `buffer`; returns the names of its inputs (the exporter leaves
    out an input nothing reads)."""
    import onnx

    from netc_runtime.onnx_symbolics import register

    register(OPSET)
    axes = {n: _dynamic(g, dims) for n, dims in [*sig.inputs, *sig.outputs]}
    args = tuple(example[n] for n, _ in sig.inputs)
    raw = io.BytesIO()
    torch.onnx.export(
        scripted,
        args,
        raw,
        dynamo=False,  # the TorchScript-based exporter: scripted loops become ONNX Loop
        input_names=[n for n, _ in sig.inputs],
        output_names=onnx_output_names(sig),
        dynamic_axes={n: a for n, a in axes.items() if a},
        opset_version=OPSET,
    )
    # the results' element types as torch computes them: the exporter guesses float for a
    # value whose type its graph does not carry (labels stacked in a `while` loop)
    model = onnx.load_from_string(raw.getvalue())
    outs = scripted(*args)
    for out, value in zip(model.graph.output, outs):
        out.type.tensor_type.elem_type = onnx.helper.np_dtype_to_tensor_dtype(value.numpy().dtype)
    # the shapes as the signature has them: the exporter's guesses for results are wrong where
    # its graph does not carry a shape (a loop's last state) and name static sizes it lost
    sizes = {d.name: d.size for graph in (g, g.search) if graph is not None for d in graph.dims}
    declared = dict([*sig.inputs, *zip(onnx_output_names(sig), (d for _, d in sig.outputs))])
    for value in [*model.graph.input, *model.graph.output]:
        shape = value.type.tensor_type.shape
        shape.ClearField("dim")
        for d in declared[value.name]:
            if sizes.get(d) is not None:
                shape.dim.add().dim_value = sizes[d]
            else:
                shape.dim.add().dim_param = d
    buffer.write(model.SerializeToString())
    return {i.name for i in model.graph.input}


def _torch_export(g: Graph, sig: Signature, wrapped, example, buffer, torch) -> None:
    from torch.export import Dim

    # `Dim.AUTO`: export infers each dim's range (an op may need a few frames, e.g. a time dim
    # downsampled 8 times needs 9 for its sizes never to be 1, which torch specialises); the
    # exported program checks it. A dim it fixed to the example's size is an error here.
    shapes = {n: {ax: Dim.AUTO for ax in _dynamic(g, ds)} for n, ds in sig.inputs}
    # dynamo's caches from an earlier export in this process (scan steps it traced) would fix
    # dims this one keeps dynamic
    torch._dynamo.reset()
    # sizes of 0 and 1 are not special cases (torch would otherwise fix a dim whose derived
    # size, e.g. after downsampling, is 1 in the example, or require it never to be)
    with torch.fx.experimental._config.patch(backed_size_oblivious=True):
        program = torch.export.export(wrapped, (), example, dynamic_shapes=shapes)
    fixed = {}
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in shapes:
            val = node.meta["val"]
            for ax, d in _dynamic(g, dict(sig.inputs)[node.name]).items():
                if isinstance(val.shape[ax], int):
                    fixed[d] = val.shape[ax]
    if fixed:
        dims = ", ".join(f"`{d}` to {n}" for d, n in fixed.items())
        raise ValueError(f"torch.export fixed {dims}, the example's size (an op's torch code specialises it)")
    torch.export.save(program, buffer)


def load(fmt: str, path: str, sig: Signature):
    """The exported file as a function of the inputs by name that returns the results by name."""
    import torch

    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}  # an input nothing reads is not in the graph
        outputs = onnx_output_names(sig)

        def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            got = session.run(outputs, {k: v for k, v in inputs.items() if k in names})
            return {n: v for (n, _), v in zip(sig.outputs, got)}

        return run
    if fmt == "torchscript":
        module = torch.jit.load(path)
    else:  # from bytes: torch.export.load warns of a file name not ending in .pt2
        module = torch.export.load(io.BytesIO(Path(path).read_bytes())).module()

    def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with torch.no_grad():
            out = module(**{k: torch.as_tensor(v) for k, v in inputs.items()})
        return {k: v.numpy() for k, v in out.items()}

    return run


@dataclass(frozen=True)
class Check:
    lens: dict[str, list[int]]  # the batch's lengths per dynamic input dim
    max_abs_diff: float


def check(
    g: Graph, fmt: str, path: str, params_path: str | None = None, seed: int = 0, search: bool = False, run=None
) -> Check:
    """Run the exported file on a batch of another size and padded length than the export's
    example (4 sequences of unequal lengths) and compare it with the torch module on valid
    frames; a difference above 1e-4, or another shape, raises `Mismatch`. `run`: the file as
    `load` gives it, where the caller has loaded it already."""
    import torch

    wrapped, sig = build(g, params_path, seed, search, as_dict=True)
    inputs = example_inputs(g, sig, 4, 7, seed + 1)
    with torch.no_grad():
        ref = {k: v.numpy() for k, v in wrapped(**{k: torch.as_tensor(v) for k, v in inputs.items()}).items()}
    with _quiet(), failing_as(fmt):
        got = (run or load(fmt, path, sig))(inputs)
    lens = {d: inputs[lens_name(d)] for d in sig.dyn}
    lens.update({d.name: ref[lens_name(d.name)] for d in g.dims if lens_name(d.name) in ref})
    worst = 0.0
    for name, dims in sig.outputs:
        if name not in got:
            raise Mismatch(f"the exported {fmt} model has no result {name!r}")
        r, o = ref[name], np.asarray(got[name])
        if r.shape != o.shape:
            raise Mismatch(f"{name} is {list(o.shape)} in the exported {fmt} model, {list(r.shape)} in torch")
        valid = valid_mask(dims, lens, g, r.shape) if dims else np.ones(r.shape, dtype=bool)
        diff = np.abs(r.astype(np.float64) - o.astype(np.float64))[valid]
        worst = max(worst, float(diff.max(initial=0.0)))
    if worst > TOLERANCE:
        raise Mismatch(f"the exported {fmt} model differs from torch by {worst:.3e} (> {TOLERANCE})")
    return Check({d: [int(n) for n in inputs[lens_name(d)]] for d in sig.dyn}, worst)
