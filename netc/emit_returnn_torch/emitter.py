"""IR → a RETURNN config for RETURNN's PyTorch backend (`backend = "torch"`), built around the
emitted torch module: the dims and `extern_data` of the TensorFlow config (batch-major), the
module itself, and RETURNN's entry points `get_model`, `train_step` (each netc loss marked with
RETURNN's run context) and `forward_step` (a beam search for a model with `choice`).

RETURNN's data pipeline gives each input batch-major with at most one dynamic dim, second, and
its lengths; the steps pass the inputs in their annotation order and the lengths as
`<dim>_lens`, as every caller of the module does.
"""

from __future__ import annotations

import os
from pathlib import Path

import jinja2

from netc.emit_tf.emitter import dim_vars, extern_data
from netc.emit_torch.module import render_module_body
from netc.errors import CompileError
from netc.ir.interface import interface
from netc.ir.model import Graph, Input
from netc.ir.search import BATCH_SIZE, search_dims, search_plan
from netc.ir.uses import values_by_id
from netc.naming import Namespace, lens_name, plain_text, py_literal, py_str

_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
# module-level names of the config (the template's own); the embedded module avoids them
CONFIG_NAMES = frozenset(
    """torch nn rf ForwardCallbackIface Dim batch_dim backend extern_data get_model train_step
    forward_step forward_callback NetcForwardCallback _netc_lens _netc_dim""".split()
)
_STEP_PARAMS = ("model", "extern_data", "_kwargs")
_INDENT = "    "


def check_inputs(g: Graph) -> None:
    """Each input must be what RETURNN's PyTorch data pipeline delivers: batch-major (every input
    has batch), with at most one dynamic dim (its lengths are `<key>:seq_len`)."""
    kinds = {d.name: d.kind for d in g.dims}
    for inp in g.inputs:
        dynamic = [d for d in inp.value.dims if kinds[d] == "dynamic"]
        if len(dynamic) > 1:
            raise CompileError(
                inp.span,
                f"returnn-torch target: input `{inp.name}` has {len(dynamic)} dynamic dims "
                f"({', '.join(dynamic)}); RETURNN's PyTorch data pipeline gives an input one",
            )


def check_output_names(g: Graph) -> None:
    """forward_step marks each output under its name; RETURNN's PyTorch backend names tensors in
    native code, which ends a name at a NUL character."""
    for o in g.outputs:
        if "\x00" in o.name:
            raise CompileError(
                o.span,
                f"returnn-torch target: output {py_str(o.name)} has a NUL character, which RETURNN's "
                "PyTorch backend cannot name a tensor with; rename it",
            )


class _Step:
    """The body of one entry point: read the inputs from `extern_data`, call the module, mark
    what it returns. Local names avoid the config's and the step's parameters."""

    def __init__(self, g: Graph, dims: dict[str, str], reserved: frozenset[str]):
        self.g = g
        self.dims = dims  # IR dim -> the config's Dim variable
        self.ns = Namespace({*reserved, *dims.values(), *_STEP_PARAMS})
        self.lines: list[str] = []
        self.lens: dict[str, str] = {}  # dynamic dim -> the local holding its lengths
        self.data: dict[str, str] = {}  # input name -> the local holding its extern_data entry

    def emit(self, line: str) -> None:
        self.lines.append(_INDENT + line)

    def call(self, method: str, inputs: list[Input], lens_dims: list[str], batch_of: Input | None = None) -> str:
        """`out = model(...)` (or `model.<method>(...)`) with the inputs and lengths it takes, and
        `batch_of`'s batch size as `batch_size` (a search that takes no input: its target's)."""
        for inp in inputs:
            self.data[inp.name] = self.ns.fresh(inp.name)
            self.emit(f"{self.data[inp.name]} = extern_data[{py_str(inp.name)}]")
        for d in lens_dims:
            src = next(i for i in inputs if d in i.value.dims)
            self.lens[d] = self.ns.fresh(lens_name(d))
            self.emit(f"{self.lens[d]} = _netc_lens({self.data[src.name]})")
        args = []
        for inp in inputs:
            raw = f"{self.data[inp.name]}.raw_tensor"
            perm = [inp.value.dims.index(d) for d in inp.annotated_dims]
            if perm != sorted(perm):  # batch-major here; the module takes the annotation's order
                raw += f".permute({', '.join(map(str, perm))})"
            args.append(f"{inp.name}={raw}")
        args += [f"{lens_name(d)}={self.lens[d]}" for d in lens_dims]
        if batch_of is not None:
            data = self.ns.fresh(batch_of.name)
            self.emit(f"{data} = extern_data[{py_str(batch_of.name)}]  # its batch size (its labels unread)")
            args.append(f"{BATCH_SIZE}={data}.raw_tensor.shape[0]")
        out = self.ns.fresh("out")
        target = "model" if method == "forward" else f"model.{method}"
        self.emit(f"{out} = {target}({', '.join(args)})")
        return out

    def made_dim(self, dim: str, lens: str) -> None:
        """A dim the step made: a `Dim` with the lengths the module returned."""
        self.dims = {**self.dims, dim: self.ns.fresh(dim)}
        self.emit(f"{self.dims[dim]} = _netc_dim({py_str(dim)}, {lens})")

    def dims_code(self, dims) -> str:
        return "[" + ", ".join(self.dims[d] for d in dims) + "]"

    def text(self) -> str:
        return "\n".join(self.lines)


def _train_step(g: Graph, dims: dict[str, str], reserved: frozenset[str]) -> str:
    api = interface(g)
    step = _Step(g, dims, reserved)
    if not g.losses:
        msg = f"network {g.network} has no loss (mark_as_loss): there is nothing to train"
        step.emit(f"raise ValueError({py_str(msg)})")
        return step.text()
    out = step.call("forward", g.inputs, list(api.input_lens))
    ctx = step.ns.fresh("ctx")
    step.emit(f"{ctx} = rf.get_run_ctx()")
    values = values_by_id(g)
    kinds = {d.name: d.kind for d in g.dims}
    first = step.data[g.inputs[0].name]
    for loss in g.losses:
        v = values[loss.value]
        dynamic = [d for d in v.dims if kinds[d] == "dynamic"]
        # RETURNN's `as_is` loss divides by the frames of its first dynamic dim, else by the batch
        if dynamic:
            d = dynamic[0]
            if d in step.lens:
                frames = f"{step.lens[d]}.sum()"
            elif d in api.made_lens:
                frames = f"{out}[{py_str(api.made_lens[d])}].sum()"
            else:
                raise CompileError(
                    loss.span,
                    f"returnn-torch target: loss `{loss.name}` is summed over the frames of `{d}`, which a "
                    "loop makes; the module returns their lengths only when an output has that dim",
                )
            norm = f", custom_inv_norm_factor=rf.convert_to_tensor({frames})"
        elif "batch" in v.dims:
            norm = f", custom_inv_norm_factor=rf.convert_to_tensor({first}.raw_tensor.shape[0])"
        else:
            norm = ""
        step.emit(f"{ctx}.mark_as_loss({out}[{py_str(loss.name)}], {py_str(loss.name)}{norm})")
    return step.text()


def _forward_step(g: Graph, dims: dict[str, str], reserved: frozenset[str]) -> str:
    step = _Step(g, dims, reserved)
    plan = search_plan(g)
    if plan is not None:
        # no user text in a docstring: a quoted name could hold the quotes that end it
        doc = "A beam search (`choice`), no targets: the best hypothesis' `search_outputs` and `scores`."
        inputs = [i for i in g.inputs if i.name in plan.inputs]
        # a search that takes no input has its target's batch size, as in RETURNN's search task
        target = None if inputs else next(i for i in g.inputs if i.name in plan.targets)
        out = step.call("search", inputs, list(plan.input_dims), target)
        for d, key in plan.made_lens.items():
            step.made_dim(d, f"{out}[{py_str(key)}]")
        marked = search_dims(g)
    else:
        api = interface(g)
        doc = "Every output of the module with its dims (losses need training: `train_step`)."
        out = step.call("forward", g.inputs, list(api.input_lens))
        for d, key in api.made_lens.items():
            step.made_dim(d, f"{out}[{py_str(key)}]")
        values = values_by_id(g)
        marked = {o.name: list(values[o.value].dims) for o in g.outputs}
    step.lines.insert(0, f'{_INDENT}"""{doc}"""')
    ctx = step.ns.fresh("ctx")
    step.emit(f"{ctx} = rf.get_run_ctx()")
    for name, odims in marked.items():
        step.emit(f"{ctx}.mark_as_output({out}[{py_str(name)}], {py_str(name)}, dims={step.dims_code(odims)})")
    return step.text()


def emit_returnn_torch(g: Graph) -> str:
    check_inputs(g)
    check_output_names(g)
    dims = dim_vars(g)
    reserved = CONFIG_NAMES | frozenset(dims.values())
    module, names = render_module_body(g, reserved)
    taken = reserved | names.all()
    return _TEMPLATES.get_template("config.py.j2").render(
        source=plain_text(os.path.basename(g.source_file)),
        network=plain_text(g.network),
        dims=[(dims[d.name], py_str(d.name), d.size) for d in g.dims if d.kind != "batch"],
        extern_data=py_literal(extern_data(g, dims, batch_major=True), 0),
        module=module,
        cls=names.cls,
        train_step=_train_step(g, dims, taken),
        forward_step=_forward_step(g, dims, taken),
    )
