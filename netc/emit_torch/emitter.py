"""IR → a standalone PyTorch module (text). Only lowering here; every decision was made by passes.

Tensors are kept in canonical dim order (batch, dynamic dims, static dims), so aligning
operands is at most an unsqueeze. Loops run over the padded length; each step freezes
the state of sequences that have ended (`torch.where` on the step's valid mask), so a
carried value after the loop is each sequence's last valid step.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import jinja2

from netc.ir.model import Graph, Loop, Node, Op, Value
from netc.naming import Namespace
from netc.ops import REGISTRY
from netc.ops.align import align_code

_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
_TORCH_DTYPE = {"float32": "torch.float32", "int32": "torch.long", "bool": "torch.bool"}
_NN_MODULE_ATTRS = {
    "training",
    "forward",
    "apply",
    "to",
    "cuda",
    "cpu",
    "eval",
    "train",
    "float",
    "double",
    "half",
    "type",
    "state_dict",
    "parameters",
    "buffers",
    "children",
    "modules",
    "zero_grad",
    "register_buffer",
    "load_returnn_params",
    "reset_parameters",
    "output_dims",
    "returnn_param_names",
    "input_names",
}


def class_name(network: str) -> str:
    name = "".join(part.capitalize() for part in re.split(r"_+", network) if part) or "Network"
    return name if name != "Model" else "Network"


class _OpCtx:
    """What an op's torch lowering may ask for (netc.ops.base.TorchCtx)."""

    training = "self.training"

    def __init__(self, em: TorchEmitter, op: Op):
        self.em, self.op = em, op

    def _val(self, i: int) -> Value:
        return self.em.values[self.op.args[i]]

    def arg(self, i: int) -> str:
        return self.em.var[self.op.args[i]]

    def in_dims(self, i: int) -> tuple[str, ...]:
        return self._val(i).dims

    def aligned(self, i: int, dims: tuple[str, ...]) -> str:
        return align_code(self.arg(i), self._val(i).dims, dims)

    def axis(self, i: int, dim: str) -> int:
        return self._val(i).dims.index(dim)

    def size(self, dim: str) -> str:
        return self.em.size(dim)

    def is_dynamic(self, dim: str) -> bool:
        return self.em.g.dim(dim).kind == "dynamic"

    def mask(self, dim: str, dims: tuple[str, ...]) -> str:
        return self.em.mask(dim, dims)

    def seq_lens(self, dim: str) -> str:
        return self.em.lens_var[dim]

    def lens(self, dim: str, dims: tuple[str, ...]) -> str:
        return align_code(f"{self.em.lens_var[dim]}.to(torch.float32)", ("batch",), dims)

    def param(self, role: str) -> str:
        return f"self.{self.em.param_attr[(self.op.param, role)]}"


class TorchEmitter:
    def __init__(self, g: Graph):
        self.g = g
        self.ns = Namespace({"torch", "nn", "self", "_seq_mask"})
        self.values: dict[int, Value] = {}
        self.var: dict[int, str] = {}
        self.lines: list[str] = []
        self.indent = 2
        self.lens_var: dict[str, str] = {}
        self.size_var: dict[str, str] = {"batch": "B"}
        self.ns.used.add("B")
        self.param_attr = {(p.path, p.role): _param_attr(f"{p.path}/{p.role}") for p in g.params}
        self.input_masks: dict[str, str | None] = {}  # input dyn dim -> its mask variable, once used
        self.mask_at = 0  # where mask variables are inserted

    # --- helpers -----------------------------------------------------------------------

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def define(self, v: Value, hint: str | None = None) -> str:
        self.values[v.id] = v
        name = self.ns.fresh(hint or v.name, "t")
        self.var[v.id] = name
        return name

    def alias(self, v: Value, of: int) -> None:
        self.values[v.id] = v
        self.var[v.id] = self.var[of]

    def size(self, dim: str) -> str:
        d = self.g.dim(dim)
        return str(d.size) if d.kind == "static" else self.size_var[dim]

    def shape(self, dims: tuple[str, ...]) -> str:
        return "(" + ", ".join(self.size(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"

    def mask(self, dim: str, dims: tuple[str, ...]) -> str:
        """The valid-frames mask of `dim`, aligned to `dims`. Masks of input dims are computed once,
        at the top of forward (inserted there on first use), not again in every loop step."""
        if dim in self.input_masks:
            name = self.input_masks[dim]
            if name is None:
                name = self.input_masks[dim] = self.ns.fresh(f"{dim}_mask")
                line = f"{name} = _seq_mask({self.lens_var[dim]}, {self.size_var[dim]})  # [batch, {dim}]"
                self.lines.insert(self.mask_at, "    " * 2 + line)
                self.mask_at += 1
        else:
            name = f"_seq_mask({self.lens_var[dim]}, {self.size_var[dim]})"
        return align_code(name, ("batch", dim), dims)

    # --- the module --------------------------------------------------------------------

    def render(self) -> str:
        g = self.g
        args = []
        for inp in g.inputs:
            args.append(self.define(inp.value, inp.name))
        dyn_dims = [d.name for d in g.dims if d.kind == "dynamic" and any(d.name in i.value.dims for i in g.inputs)]
        for d in dyn_dims:
            self.lens_var[d] = self.ns.fresh(f"{d}_lens")
            args.append(self.lens_var[d])
        for inp in g.inputs:
            x = self.var[inp.value.id]
            perm = [inp.annotated_dims.index(d) for d in inp.value.dims]
            if perm != list(range(len(perm))):
                self.emit(f"{x} = {x}.permute({', '.join(map(str, perm))})  # to canonical dim order")
            if inp.value.dtype == "int32":
                self.emit(f"{x} = {x}.long()")
        first = self.var[g.inputs[0].value.id]
        self.emit(f"B = {first}.shape[0]")
        for d in dyn_dims:
            src = next(i for i in g.inputs if d in i.value.dims)
            self.size_var[d] = self.ns.fresh(f"{d}_size")
            self.emit(f"{self.size_var[d]} = {self.var[src.value.id]}.shape[{src.value.dims.index(d)}]")
        self.input_masks = dict.fromkeys(dyn_dims)
        self.mask_at = len(self.lines)
        self.block(g.body)
        results = [(o.name, self.var[o.value]) for o in g.outputs]
        made = [
            d for d in self.lens_var if d not in dyn_dims and any(d in self.values[o.value].dims for o in g.outputs)
        ]
        results += [(f"{d}_lens", self.lens_var[d]) for d in made]
        for loss in g.losses:
            v = self.values[loss.value]
            x = self.var[loss.value]
            for d in v.dims:
                if g.dim(d).kind == "dynamic":
                    x = f"{x}.masked_fill(~{self.mask(d, v.dims)}, 0.0)"
            var = self.ns.fresh(f"{loss.name}_loss")
            self.emit(f"{var} = {x}.sum()  # loss {loss.name!r}: summed over valid frames")
            results.append((loss.name, var))
        outs = ", ".join(f'"{name}": {var}' for name, var in results)
        self.emit(f"return {{{outs}}}")
        out_values = {o.name: self.values[o.value] for o in g.outputs}
        return _TEMPLATES.get_template("module.py.j2").render(
            source=os.path.basename(g.source_file),
            network=g.network,
            cls=class_name(g.network),
            args=", ".join(args),
            inputs=[(i.name, list(i.annotated_dims)) for i in g.inputs],
            lens_args=[self.lens_var[d] for d in dyn_dims],
            output_dims={name: list(v.dims) for name, v in out_values.items()},
            losses=[loss.name for loss in g.losses],
            containers=_containers(self.param_attr.values()),
            params=[(self.param_attr[(p.path, p.role)], self.shape(p.dims), p.name, p.init) for p in g.params],
            body="\n".join(self.lines),
        )

    # --- blocks ------------------------------------------------------------------------

    def block(self, nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                self.loop(n)
            else:
                self.op(n)

    def op(self, op: Op) -> None:
        opdef = REGISTRY[op.op]
        expr = opdef.torch(_OpCtx(self, op), op)
        names = [self.define(v, v.name or op.op) for v in op.outs]
        comment = f"  # line {op.span.line}"
        self.emit(f"{', '.join(names)} = {expr}{comment}")

    def loop(self, n: Loop) -> None:
        axis = n.axis
        if n.end is not None:
            self.emit(f"# loop until each sequence ends, new dim {axis} (line {n.span.line})")
        else:
            self.emit(f"# loop over {axis}{', backwards' if n.reverse else ''} (line {n.span.line})")
        for inv in n.invariants:
            self.alias(inv.inner, inv.outer)
        for c in n.carries:
            name = self.define(c.inner)
            self.emit(f"{name} = {self.var[c.init]}")
            if c.out is not None:
                self.alias(c.out, c.inner.id)
        stack_lists = {}
        for s in n.stacks:
            stack_lists[s.out.id] = self.ns.fresh(f"{s.name}_steps")
            self.emit(f"{stack_lists[s.out.id]} = []")
        last_vars = {}
        for ll in n.lasts:
            v = ll.out
            last_vars[v.id] = self.define(v)
            dtype = "" if v.dtype == "float32" else f", dtype={_TORCH_DTYPE[v.dtype]}"
            self.emit(f"{last_vars[v.id]} = torch.zeros({self.shape(v.dims)}{dtype})")
        step = self.ns.fresh("t")
        valid = self.ns.fresh("valid")
        if n.end is not None:
            ended = self._end_loop_head(n, step, valid)
        else:
            steps = f"range({self.size_var[axis]})"
            # backwards: each sequence starts at its own last frame (earlier steps are not valid for it)
            self.emit(f"for {step} in {f'reversed({steps})' if n.reverse else steps}:")
            self.indent += 1
            self.emit(f"{valid} = {step} < {self.lens_var[axis]}  # [batch]: sequences still running")
        for s in n.seqs:
            outer = self.values[s.outer]
            pos = outer.dims.index(axis)
            index = ", ".join([":"] * pos + [step])
            frame = self.define(s.inner, s.inner.name or f"{self.var[s.outer]}_t")
            self.emit(f"{frame} = {self.var[s.outer]}[{index}]")
        self.block(n.body)
        for c in n.carries:
            cond = align_code(valid, ("batch",), c.inner.dims)
            self.emit(f"{self.var[c.inner.id]} = torch.where({cond}, {self.var[c.next]}, {self.var[c.inner.id]})")
        for s in n.stacks:
            self.emit(f"{stack_lists[s.out.id]}.append({self.var[s.value]})")
        for ll in n.lasts:
            # a value assigned after `if end(...): break` is not computed at the ending step
            keep = f"({valid} & ~{self.var[n.end]})" if ll.after_end else valid
            cond = align_code(keep, ("batch",), ll.out.dims)
            self.emit(f"{last_vars[ll.out.id]} = torch.where({cond}, {self.var[ll.value]}, {last_vars[ll.out.id]})")
        if n.end is not None:
            self._end_loop_tail(n, step, valid, ended)
        self.indent -= 1
        if n.end is not None:
            self.size_var[axis] = self.ns.fresh(f"{axis}_size")
            self.emit(f"{self.size_var[axis]} = int({self.lens_var[axis]}.max())")
        for s in n.stacks:
            name = self.define(s.out)
            pos = s.out.dims.index(axis)
            steps = f"{stack_lists[s.out.id]}[::-1]" if n.reverse else stack_lists[s.out.id]
            self.emit(f"{name} = torch.stack({steps}, dim={pos})")
            if n.end is not None:
                self.emit(f"{name} = {name}.narrow({pos}, 0, {self.size_var[axis]})")
            self.emit(f"{name} = {name}.masked_fill(~{self.mask(axis, s.out.dims)}, 0)  # zero padded frames")

    def _end_loop_head(self, n: Loop, step: str, valid: str) -> str:
        """`while` until every sequence has ended (or reached its step limit)."""
        ended = self.ns.fresh("ended")
        lens = self.lens_var[n.axis] = self.ns.fresh(f"{n.axis}_lens")
        self.emit(f"{ended} = torch.zeros(B, dtype=torch.bool)")
        self.emit(f"{lens} = torch.zeros(B, dtype=torch.long)  # steps each sequence ran: its length of {n.axis}")
        self.emit(f"{step} = 0")
        self.emit("while True:")
        self.indent += 1
        limit = f" & ({step} < {self.var[n.bound]})" if n.bound is not None else ""
        limit += f" & ({step} < {n.max_steps})" if n.max_steps is not None else ""
        self.emit(f"{valid} = ~{ended}{limit}  # [batch]: sequences still running")
        self.emit(f"if not bool({valid}.any()):")
        self.emit("    break")
        return ended

    def _end_loop_tail(self, n: Loop, step: str, valid: str, ended: str) -> None:
        end = self.var[n.end]
        lens = self.lens_var[n.axis]
        counted = valid if n.include_eos else f"({valid} & ~{end})"
        self.emit(f"{lens} = {lens} + {counted}.long()")
        self.emit(f"{ended} = {ended} | ({valid} & {end})")
        self.emit(f"{step} += 1")


def _param_attr(name: str) -> str:
    parts = [p if p not in _NN_MODULE_ATTRS else f"{p}_" for p in name.split("/")]
    return ".".join(parts)


def _containers(attrs) -> list[str]:
    """Every intermediate `nn.Module` a parameter path needs, parents first."""
    out: list[str] = []
    for a in attrs:
        parts = a.split(".")[:-1]
        for i in range(1, len(parts) + 1):
            c = ".".join(parts[:i])
            if c not in out:
                out.append(c)
    return out


def emit_torch(g: Graph) -> str:
    return TorchEmitter(g).render()
