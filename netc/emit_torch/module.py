"""The torch module's file: its methods (`forward` from `TorchEmitter`, `search` from
`SearchEmitter`), the ops' helper functions, parameters and interface, rendered from the
templates."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import jinja2

from netc.emit_torch.decisions import TorchDecisions
from netc.emit_torch.emitter import ModuleNames, TorchEmitter
from netc.emit_torch.free import free_after_last_use
from netc.emit_torch.lowering import lowered
from netc.emit_torch.scan import SCAN_HELPER, WHILE_HELPER, beam_while, scan_helper, while_helper
from netc.emit_torch.search import SearchEmitter
from netc.ir.interface import interface
from netc.ir.loopkinds import choice_op
from netc.ir.model import Graph, Loop, Node
from netc.ir.search import BATCH_SIZE, search_plan
from netc.naming import Namespace, lens_name, plain_text, py_literal, py_str
from netc.ops import REGISTRY
from netc.ops.search import torch_beam_step, torch_beam_step_scan, torch_sample_step

_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)


def op_helpers(g: Graph) -> dict[str, Callable[[str], str]]:
    """The torch helpers of every op of the graph (and of its search graph)."""
    out: dict[str, Callable[[str], str]] = {}
    _add_helpers(g.body, out, lowered(g))
    if g.search is not None:
        _add_helpers(g.search.body, out, lowered(g.search))
    plan = search_plan(g)
    if plan is not None and beam_while(lowered(g.search or g), plan.loop):  # the beam search as torch's while_loop
        out[WHILE_HELPER] = while_helper
    return out


def _add_helpers(nodes: list[Node], out: dict[str, Callable[[str], str]], low: TorchDecisions) -> None:
    # a function of its own, not a closure calling itself (a reference cycle, freed only by
    # the cyclic collector)
    for n in nodes:
        if isinstance(n, Loop):
            if low.scanned(n) and n.end is not None and n.target is None:
                out[WHILE_HELPER] = while_helper
            elif low.scanned(n):
                out[SCAN_HELPER] = scan_helper
            _add_helpers(n.body, out, low)
        else:
            out.update(REGISTRY[n.op].torch_helpers(n))


def _beam_helper(g: Graph, plan, names: ModuleNames) -> str | None:
    """The beam step of `search`: its step a tensor where the beam loop is torch's while_loop."""
    if plan is None:
        return None
    scan = beam_while(lowered(g.search or g), plan.loop)
    if (choice := choice_op(plan.loop)) is not None and choice.attrs.get("sample"):
        return torch_sample_step(names.beam_fn, scan)
    return (torch_beam_step_scan if scan else torch_beam_step)(names.beam_fn)


def helper_sources(helpers: dict[str, Callable[[str], str]], names: ModuleNames) -> list[str]:
    return [make(names.helpers[key]) for key, make in sorted(helpers.items())]


def containers(attrs) -> list[str]:
    """Every intermediate `nn.Module` a parameter path needs, parents first."""
    out: dict[str, None] = {}
    for a in attrs:
        parts = a.split(".")[:-1]
        for i in range(1, len(parts) + 1):
            out[".".join(parts[:i])] = None
    return list(out)


def arg_name(param: str) -> str:
    """`y` of `y: torch.Tensor | None = None`."""
    return param.split(":")[0].split("=")[0].strip()


def _def(name: str, params: list[str]) -> str:
    """A method's `def` line, one parameter a line when they do not fit on one."""
    line = f"    def {name}({', '.join(params)}):"
    if len(line) <= 100:
        return line
    return f"    def {name}(\n" + "".join(f"        {p},\n" for p in params) + "    ):"


def method(name: str, public: list[str], params: list[str], body: str, direct: bool, head: str = "") -> str:
    """A method of the module taking `public` (callers' names, annotations and defaults included).
    When the body cannot run under those names (`direct` is False), `name` passes them on to `_name`."""
    args = ", ".join(arg_name(p) for p in public)
    if direct:
        return f"{_def(name, ['self', *public])}\n{head}{body}"
    receiver = Namespace([arg_name(p) for p in public], python=False).fresh("self")
    return (
        f"{_def(name, [receiver, *public])}\n{head}        return {receiver}._{name}({args})\n\n"
        f"    def _{name}(self, {', '.join(params)}):\n"
        f"        # the inputs under other names here: they would shadow names this code uses\n{body}"
    )


def emit_torch(g: Graph, inference: bool = False) -> str:
    """`inference`: `g` is an inference graph (`passes.inference`), and a model with `choice`
    searches unless called with `search=False`."""
    return render_module(g, inference)[0]


def render_module(g: Graph, inference: bool = False) -> tuple[str, TorchEmitter]:
    """The module's text, and the emitter of its `forward` (its provenance: `op_lines`)."""
    context, fwd = _module_context(g, frozenset(), inference)
    return _TEMPLATES.get_template("module.py.j2").render(context), fwd


def render_module_body(g: Graph, reserved: frozenset[str]) -> tuple[str, ModuleNames]:
    """The module without its header and imports (`torch`, `nn`), for a file that embeds it;
    its module-level names avoid `reserved`, the names that file defines."""
    context, _ = _module_context(g, reserved)
    return _TEMPLATES.get_template("module_body.py.j2").render(context), context["names"]


def _module_context(g: Graph, reserved: frozenset[str], inference: bool = False) -> tuple[dict, TorchEmitter]:

    api = interface(g)
    plan = search_plan(g)
    public = [*api.inputs, *api.input_lens.values()]
    helpers = op_helpers(g)
    names = ModuleNames.of(g, public, helpers, reserved)
    fwd = TorchEmitter(g, names, public)
    params, body = fwd.forward()
    body = free_after_last_use(body, fwd.kept(params))
    head = ""
    search_method = None
    if plan is not None:  # `forward(..., search=True)` searches: from the first target on, all may be left out
        targets = [i for i in api.inputs if i in plan.targets] + [
            api.input_lens[d] for d in api.input_lens if d not in plan.input_dims
        ]
        first = min(public.index(t) for t in targets)
        optional = public[first:]  # typed, for TorchScript (an untyped parameter is a Tensor there)
        public = (
            public[:first] + [f"{p}: torch.Tensor | None = None" for p in optional] + [f"search: bool = {inference}"]
        )
        search_public = [*plan.inputs, *(lens_name(d) for d in plan.input_dims)]
        head = "        if search:\n"
        # every optional input is checked where it is needed: TorchScript then knows it is a tensor
        if missing := [p for p in search_public if p in optional]:
            head += (
                f"            if {' or '.join(f'{p} is None' for p in missing)}:\n"
                f"                raise TypeError({py_str('search needs ' + ', '.join(missing))})\n"
            )
        if not plan.inputs:  # the search takes no input: its batch size, given or the target's
            public.append(f"{BATCH_SIZE}: int | None = None")
            search_public.append(f"{BATCH_SIZE}: int")
            target = next(i for i in g.inputs if i.name in plan.targets)
            head += (
                f"            if {BATCH_SIZE} is None:\n"
                f"                if {target.name} is None:\n"
                f"                    raise TypeError({py_str(f'search needs {BATCH_SIZE} (or {target.name}, whose batch size it takes)')})\n"
                f"                {BATCH_SIZE} = {target.name}.shape[{target.annotated_dims.index('batch')}]\n"
            )
        head += (
            f"            return self.search({', '.join(arg_name(p) for p in search_public)})\n"
            f"        if {' or '.join(f'{p} is None' for p in optional)}:\n"
            f"            raise TypeError({py_str('training needs ' + ', '.join(optional) + ' (or search=True)')})\n"
        )
        searcher = SearchEmitter(g.search or g, names, [arg_name(p) for p in search_public], plan)
        search_params, search_body = searcher.search()
        search_body = free_after_last_use(search_body, searcher.kept(search_params))
        search_method = method("search", search_public, search_params, search_body, searcher.direct)
    out_values = {o.name: fwd.values[o.value] for o in g.outputs}
    context = dict(
        flags=" --inference" if inference else "",
        source=plain_text(os.path.basename(g.source_file)),
        network=plain_text(g.network),
        names=names,
        public=", ".join(arg_name(p) for p in public),
        forward=method("forward", public, params, body, fwd.direct, head),
        search=search_method,
        beam_helper=_beam_helper(g, plan, names),
        op_helpers=helper_sources(helpers, names),
        search_outputs=py_literal(list(plan.outputs)) if plan else None,
        input_dims=py_literal([[i.name, list(i.annotated_dims)] for i in g.inputs]),
        output_dims=py_literal({name: list(v.dims) for name, v in out_values.items()}),
        losses=py_literal([loss.name for loss in g.losses]),
        returnn_param_names=[(py_str(p.name), py_str(fwd.param_attr[(p.path, p.role)])) for p in g.params],
        containers=containers(fwd.param_attr.values()),
        param_defs=[(fwd.param_attr[(p.path, p.role)], fwd.shape(p.dims), p.init) for p in g.params],
    )
    return context, fwd
