"""IR → a standalone PyTorch module (text). Only lowering here; every decision was made by passes.

Tensors are kept in canonical dim order (batch, dynamic dims, static dims), so aligning
operands is at most an unsqueeze. Loops run over the padded length. Padded frames may hold
anything (as inputs' do): ops that mix frames mask their operands, outputs and losses are
masked at the end. States are frozen past a sequence's end (`torch.where` on the step's
valid mask) only where padded steps could reach a valid frame or what is read after the
loop (the `padded_steps` pass decides).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from netc.emit_torch.lowering import lowered
from netc.emit_torch.scan import scan_loop
from netc.ir.interface import interface, search_arguments
from netc.ir.model import Graph, Input, Loop, Node, Op, ParamDef, Region, Value
from netc.naming import PYTHON_RESERVED, Namespace, identifier, lens_name, plain_text, py_str
from netc.ops import REGISTRY
from netc.ops.align import align_code, where_valid

_TORCH_DTYPE = {"int32": "torch.long", "bool": "torch.bool"}  # float32 is the module's float dtype


def _tuple(items: tuple[str, ...]) -> str:
    """Code for a tuple of these items' code (one item: `(x,)`)."""
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def zeroed(x: str, valid: str, dtype: str) -> str:
    """Code for x with zeros where not `valid`; bools by `&` (`torch.where` with a 0 makes ints,
    and TorchScript types a `False` as an int)."""
    return f"({x} & {valid})" if dtype == "bool" else where_valid(x, valid, "0")


# public members of torch 2.13's nn.Module (instances included) and the generated class's own:
# a parameter or container attribute must not shadow any (tests/test_names.py keeps this current)
NN_MODULE_MEMBERS = frozenset(
    """T_destination add_module apply bfloat16 buffers call_super_init children compile cpu cuda
    double dump_patches eval extra_repr float forward get_buffer get_extra_state get_parameter
    get_submodule half ipu load_state_dict modules mtia named_buffers named_children named_modules
    named_parameters parameters register_backward_hook register_buffer register_forward_hook
    register_forward_pre_hook register_full_backward_hook register_full_backward_pre_hook
    register_load_state_dict_post_hook register_load_state_dict_pre_hook register_module
    register_parameter register_state_dict_post_hook register_state_dict_pre_hook requires_grad_
    set_extra_state set_submodule share_memory state_dict to to_empty train training type xpu
    zero_grad""".split()
)
GENERATED_MEMBERS = frozenset(
    {"input_dims", "output_dims", "losses", "returnn_param_names", "load_returnn_params", "reset_parameters"}
    | {"forward", "_forward", "search", "_search", "search_outputs"}
)
# names the module's code uses besides its own: an input named like one of these cannot be a
# parameter of the function holding the body (it would shadow it), see `TorchEmitter.signature`
_BODY_GLOBALS = PYTHON_RESERVED | {"torch", "nn", "self"}


def class_name(network: str) -> str:
    """`greedy_decoder` → `GreedyDecoder`."""
    return "".join(part[:1].upper() + part[1:] for part in identifier(network).split("_") if part) or "Network"


class _OpCtx:
    """What an op's torch lowering may ask for (netc.ops.base.TorchCtx)."""

    training = "self.training"

    def __init__(self, em: TorchEmitter, op: Op):
        self.em, self.op = em, op
        self.first = ""

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

    def may_be_empty(self, dim: str) -> bool:
        return self.em.g.dim(dim).may_be_empty

    def mask(self, dim: str, dims: tuple[str, ...]) -> str:
        return self.em.mask(dim, dims)

    def seq_lens(self, dim: str) -> str:
        return self.em.lens_var[dim]

    def lens(self, dim: str, dims: tuple[str, ...]) -> str:
        return align_code(f"{self.em.lens_var[dim]}.to({self.em.dtype()})", ("batch",), dims)

    def param(self, role: str) -> str:
        p = f"self.{self.em.param_attr[self.op.param_key(role)]}"
        return f"{p}.t()" if self.op.transposed(role) else p  # another module's, held [out, in]

    def helper(self, key: str) -> str:
        return self.em.names.helpers[key]

    def once(self, expr: str, hint: str) -> str:
        return self.em.once(f"expr:{expr}", hint, expr)

    def region(self, i: int) -> str:
        return self.em.region_fn(self.op.regions[i])

    @property
    def float_dtype(self) -> str:
        return self.em.dtype()

    @property
    def device(self) -> str:
        return self.em.device()


@dataclass(frozen=True)
class ModuleNames:
    """Names at module level. None of them may be an input's name: a method's parameters would
    shadow them."""

    mask_fn: str
    beam_fn: str
    cls: str
    alias: str
    helpers: dict[str, str]  # ops' torch helpers: key -> name (see `helper_sources`)

    @classmethod
    def of(
        cls,
        g: Graph,
        public: list[str],
        helpers: dict[str, Callable[[str], str]],
        reserved: frozenset[str] = frozenset(),
    ) -> ModuleNames:
        """`helpers`: the ops' torch helpers (`op_helpers`); `reserved`: names of a file the module
        is embedded in (a RETURNN config)."""
        ns = Namespace({"torch", "nn", *public, *reserved})
        fixed = ns.fresh("_seq_mask"), ns.fresh("_beam_step"), ns.fresh(class_name(g.network)), ns.fresh("Model")
        return cls(*fixed, {key: ns.fresh(key) for key in sorted(helpers)})

    def all(self) -> set[str]:
        return {self.mask_fn, self.beam_fn, self.cls, self.alias, *self.helpers.values()}


class TorchEmitter:
    """The body of one method of the module (`forward`; see `emit_torch.search` for `search`)."""

    def __init__(self, g: Graph, names: ModuleNames, public: list[str]):
        self.g = g
        self.api = interface(g)
        self.names = names
        self.public = public  # the method's parameters, as callers name them
        # the body runs under the inputs' own names unless one would shadow a name it uses
        self.direct = all(n == identifier(n) and n not in _BODY_GLOBALS for n in public)
        self.ns = Namespace({"torch", "nn", "self", *names.all()})
        if self.direct:
            for n in public:
                self.ns.reserve(n)
        for n in search_arguments(g):  # `forward`'s own arguments besides the inputs
            self.ns.reserve(n)
        self.values: dict[int, Value] = {}
        self.var: dict[int, str] = {}
        self.lines: list[str] = []
        self.indent = 2
        self.lens_var: dict[str, str] = {}
        self.size_var: dict[str, str] = {}
        self.param_attr = param_attrs(g.params)
        self.prelude: dict[str, str] = {}  # key -> variable defined once at the top of the method
        self.prelude_at = 0  # where those definitions are inserted
        self.float_input: str | None = None
        self.first_input: str | None = None  # the first input the method takes (`start`)
        self.zero_padded: set[int] = set()  # values known to hold zeros in padded frames
        self.op_lines: dict[int, str] = {}  # an op's first value id -> its line, for `netc preview`'s provenance
        self.top_masks = set(self.api.input_lens)  # dims whose lengths are known at the top of the method
        self.low = lowered(g)  # torch's decisions on the graph (`TorchDecisions`)
        # `a + Linear(no bias)(x)` in one `torch.addmm(a, x, W)` (`TorchDecisions.addmm`): the
        # linears' values, computed inside the add's line; the linears, met before their adds
        self.absorbed = set(self.low.addmm.values())
        self.linears: dict[int, Op] = {}
        self.regions: dict[int, str] = {}  # id of an op's region -> its local function

    # --- helpers -----------------------------------------------------------------------

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def emit_states(self, pairs: list[tuple[str, str]]) -> None:
        """A loop's states take their next values at once: one assignment of them all where a
        next value reads a state assigned before it (`e1 = e0` of the previous step's `e0`)."""
        pairs = [(state, new) for state, new in pairs if state != new]
        before: list[str] = []
        for state, new in pairs:
            if any(re.search(rf"(?<![\w.]){re.escape(b)}\b", new) for b in before):
                self.emit(f"{', '.join(s for s, _ in pairs)} = {', '.join(n for _, n in pairs)}")
                return
            before.append(state)
        for state, new in pairs:
            self.emit(f"{state} = {new}")

    def define(self, v: Value, hint: str | None = None) -> str:
        self.values[v.id] = v
        name = self.ns.fresh(hint or v.name, "t")
        self.var[v.id] = name
        return name

    def alias_value(self, v: Value, of: int) -> None:
        self.values[v.id] = v
        self.var[v.id] = self.var[of]

    def once(self, key: str, hint: str, expr: str) -> str:
        """A variable computed once at the top of forward (on first use), e.g. a mask."""
        if key not in self.prelude:
            name = self.prelude[key] = self.ns.fresh(hint)
            self.lines.insert(self.prelude_at, "    " * 2 + f"{name} = {expr}")
            self.prelude_at += 1
        return self.prelude[key]

    def device(self) -> str:
        """Every tensor the method creates lives on its inputs' device (with none: the parameters')."""
        return self.once("device", "device", self._like(self.first_input, "device", 'torch.device("cpu")'))

    def dtype(self) -> str:
        """The float dtype of the computation: the float inputs', else the parameters'."""
        return self.once("dtype", "dtype", self._like(self.float_input, "dtype", "torch.get_default_dtype()"))

    def _like(self, tensor: str | None, attr: str, default: str) -> str:
        """`attr` of `tensor` (an input), else of the first parameter, else `default`."""
        if tensor is not None:
            return f"{tensor}.{attr}"
        if self.g.params:
            p = self.g.params[0]
            return f"self.{self.param_attr[(p.path, p.role)]}.{attr}"
        return default

    def size(self, dim: str) -> str:
        d = self.g.dim(dim)
        return str(d.size) if d.kind == "static" else self.size_var[dim]

    def zeros(self, v: Value) -> str:
        """Code for zeros of `v`'s shape and type."""
        return self.zeros_of(tuple(self.size(d) for d in v.dims), v.dtype)

    def zeros_of(self, sizes: tuple[str, ...], dtype: str) -> str:
        """Code for zeros of these sizes (code) and IR dtype."""
        torch_dtype = _TORCH_DTYPE.get(dtype) or self.dtype()
        return f"torch.zeros({_tuple(sizes)}, dtype={torch_dtype}, device={self.device()})"

    def shape(self, dims: tuple[str, ...]) -> str:
        return _tuple(tuple(self.size(d) for d in dims))

    def mask(self, dim: str, dims: tuple[str, ...]) -> str:
        """The valid-frames mask of `dim`, aligned to `dims`. Masks of input dims are computed once,
        at the top of forward, not again in every loop step."""
        call = f"{self.names.mask_fn}({self.lens_var[dim]}, {self.size_var[dim]})"
        if dim in self.top_masks:
            call = self.once(f"mask:{dim}", f"{dim}_mask", f"{call}  # [batch, {plain_text(dim)}]")
        return align_code(call, ("batch", dim), dims)

    # --- the module --------------------------------------------------------------------

    def start(self, inputs: list[Input], dyn_dims: list[str], batch_arg: str | None = None) -> list[str]:
        """Inputs to canonical order, batch and dim sizes; the method's parameters (as named here).
        `batch_arg`: the argument giving the batch size, where the method takes no input (a search
        whose only inputs are its targets)."""
        for inp in inputs:  # the input's own name (reserved above), else a fresh one
            self.values[inp.value.id] = inp.value
            self.var[inp.value.id] = inp.name if self.direct else self.ns.fresh(inp.name)
        for d in dyn_dims:
            arg = lens_name(d)
            self.lens_var[d] = arg if self.direct else self.ns.fresh(arg)
        params = [self.var[i.value.id] for i in inputs] + [self.lens_var[d] for d in dyn_dims]
        if batch_arg is not None:
            params.append(batch_arg if self.direct else self.ns.fresh(batch_arg))
        self.first_input = self.var[inputs[0].value.id] if inputs else None
        for inp in inputs:
            x = self.var[inp.value.id]
            perm = [inp.annotated_dims.index(d) for d in inp.value.dims]
            if perm != list(range(len(perm))):
                self.emit(f"{x} = {x}.permute({', '.join(map(str, perm))})  # to canonical dim order")
            if inp.value.dtype == "int32":
                self.emit(f"{x} = {x}.long()")
            elif self.float_input is None:
                self.float_input = x
        self.size_var["batch"] = self.ns.fresh("B")
        if inputs:
            first = inputs[0]
            self.emit(f"{self.size_var['batch']} = {self.var[first.value.id]}.shape[{first.value.dims.index('batch')}]")
        else:
            self.emit(f"{self.size_var['batch']} = {params[-1]}")
        for d in dyn_dims:
            src = next(i for i in inputs if d in i.value.dims)
            self.size_var[d] = self.ns.fresh(f"{d}_size")
            self.emit(f"{self.size_var[d]} = {self.var[src.value.id]}.shape[{src.value.dims.index(d)}]")
        self.prelude_at = len(self.lines)
        return params

    def forward(self) -> tuple[list[str], str]:
        """`forward`: every output, the lengths of dims loops made, and the losses."""
        g = self.g
        params = self.start(g.inputs, list(self.api.input_lens))
        self.block(g.body)
        results = [(o.name, self.padded_zero(o.value)) for o in g.outputs]
        results += [(key, self.lens_var[d]) for d, key in self.api.made_lens.items()]
        for loss in g.losses:
            v = self.values[loss.value]
            x = self.var[loss.value]
            for d in v.dims:
                if g.dim(d).kind == "dynamic":
                    x = where_valid(x, self.mask(d, v.dims), "0.0")
            var = self.ns.fresh(f"{loss.name}_loss")
            self.emit(f"{var} = {x}.sum()  # loss {py_str(loss.name)}: summed over valid frames")
            results.append((loss.name, var))
        self.emit("return {" + ", ".join(f"{py_str(name)}: {var}" for name, var in results) + "}")
        return params, "\n".join(self.lines)

    def kept(self, params: list[str]) -> set[str]:
        """The method's names `free_after_last_use` leaves: its parameters, sizes, device and dtype."""
        return {*params, *self.size_var.values(), *(self.prelude.get(k) for k in ("device", "dtype"))} - {None}

    def padded_zero(self, vid: int) -> str:
        """The value with zeros in padded frames, as outputs are returned (stacks already are)."""
        v = self.values[vid]
        dyn = [d for d in v.dims if self.g.dim(d).kind == "dynamic"]
        if vid in self.zero_padded or not dyn:
            return self.var[vid]
        x = self.var[vid]
        for d in dyn:
            x = zeroed(x, self.mask(d, v.dims), v.dtype)
        name = self.ns.fresh(f"{self.var[vid]}_out")
        self.emit(f"{name} = {x}  # zero padded frames")
        self.var[vid] = name
        self.zero_padded.add(vid)
        return name

    # --- blocks ------------------------------------------------------------------------

    def block(self, nodes: list[Node]) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                self.loop(n)
            else:
                self.op(n)

    def op(self, op: Op) -> None:
        if op.outs[0].id in self.absorbed:
            self.linears[op.outs[0].id] = op
            return
        opdef = REGISTRY[op.op]
        ctx = _OpCtx(self, op)
        first = opdef.torch_first(ctx, op)
        if first is not None:
            ctx.first = self.ns.fresh(first[0])
            self.emit(f"{ctx.first} = {first[1]}")
        for d, (lens, size) in opdef.torch_made_dims(ctx, op).items():  # dims the op makes
            self.lens_var[d], self.size_var[d] = self.ns.fresh(lens_name(d)), self.ns.fresh(f"{d}_size")
            self.emit(f"{self.lens_var[d]} = {lens}  # lengths of {plain_text(d)}")
            self.emit(f"{self.size_var[d]} = {size}")
        operand = self.low.addmm_operand(op)
        linear = self.linears[operand] if operand is not None else None
        if linear is not None:
            other = self.var[next(a for a in op.args if a != linear.outs[0].id)]
            weight = REGISTRY[linear.op].weight(_OpCtx(self, linear), linear)
            expr = f"torch.addmm({other}, {self.var[linear.args[0]]}, {weight})"
        else:
            expr = opdef.torch(ctx, op)
        names = self.op_line(op, expr)
        if linear is not None:  # the linear's own line and result, for `netc preview`: the addmm
            self.op_lines[linear.outs[0].id] = self.lines[-1].strip()
            self.var[linear.outs[0].id] = names[0]

    def region_fn(self, r: Region) -> str:
        """A local function computing the region (`Op.regions`) from its arguments; defined at
        its op's place, once."""
        if id(r) in self.regions:
            return self.regions[id(r)]
        name = self.regions[id(r)] = self.ns.fresh(r.name)
        args = [self.define(v) for v in r.args]
        self.emit(f"def {name}({', '.join(args)}):")
        self.indent += 1
        self.block(r.body)
        self.emit(f"return {', '.join(self.var[i] for i in r.results)}")
        self.indent -= 1
        return name

    def op_line(self, op: Op, expr: str) -> list[str]:
        """The line `<op's results> = expr  # line N`; its results' names (its line is the op's
        provenance for `netc preview`)."""
        names = [self.define(v, v.name or op.hint()) for v in op.outs]
        self.emit(f"{', '.join(names)} = {expr}  # line {op.span.line}")
        self.op_lines[op.outs[0].id] = self.lines[-1].strip()
        return names

    def loop(self, n: Loop) -> None:
        if self.low.scanned(n):
            scan_loop(self, n)
            return
        axis = n.axis
        # a loop with `choice` runs over its target's frames here: its end applies to searching
        ends = n.end is not None and n.target is None
        if ends:
            self.emit(f"# loop until each sequence ends, new dim {plain_text(axis)} (line {n.span.line})")
        else:
            self.emit(f"# loop over {plain_text(axis)}{', backwards' if n.reverse else ''} (line {n.span.line})")
        for inv in n.invariants:
            self.alias_value(inv.inner, inv.outer)
        for c in n.carries:
            name = self.define(c.inner)
            self.emit(f"{name} = {self.var[c.init]}")
            if c.out is not None and self.low.frozen_state(c):
                self.alias_value(c.out, c.inner.id)
        stack_lists = {}
        for s in n.stacks:
            stack_lists[s.out.id] = self.ns.fresh(f"{s.name}_steps")
            self.emit(f"{stack_lists[s.out.id]} = []")
        last_vars = {}
        for ll in n.lasts:
            if self.low.stack_of(ll) is not None:
                continue
            v = ll.out
            last_vars[v.id] = self.define(v)
            if ll.init is not None:  # what a sequence that never assigned it holds
                self.emit(f"{last_vars[v.id]} = {self.var[ll.init]}")
                continue
            self.emit(f"{last_vars[v.id]} = {self.zeros(v)}")
        step = self.ns.fresh("t")
        valid = self.ns.fresh("valid")
        if ends:
            ended = self._end_loop_head(n, step, valid)
        else:
            size = self.size_var[axis]
            # backwards: each sequence starts at its own last frame (earlier steps are not valid for
            # it); `range(n - 1, -1, -1)`, not `reversed(range(n))`, which TorchScript lacks
            self.emit(f"for {step} in {f'range({size} - 1, -1, -1)' if n.reverse else f'range({size})'}:")
            self.indent += 1
            if any(self.low.frozen_state(c) for c in n.carries) or last_vars:
                self.emit(f"{valid} = {step} < {self.lens_var[axis]}  # [batch]: sequences still running")
        for s in n.seqs:
            outer = self.values[s.outer]
            pos = outer.dims.index(axis)
            index = ", ".join([":"] * pos + [step])
            frame = self.define(s.inner, s.inner.name or f"{self.var[s.outer]}_t")
            self.emit(f"{frame} = {self.var[s.outer]}[{index}]")
        self.block(n.body)
        for s in n.stacks:
            self.emit(f"{stack_lists[s.out.id]}.append({self.var[s.value]})")
        for ll in n.lasts:
            if ll.out.id not in last_vars:
                continue
            # a value assigned after `if end(...): break` is not computed at the ending step
            keep = f"({valid} & ~{self.var[n.end]})" if ll.after_end else valid
            cond = align_code(keep, ("batch",), ll.out.dims)
            self.emit(f"{last_vars[ll.out.id]} = torch.where({cond}, {self.var[ll.value]}, {last_vars[ll.out.id]})")
        if ends:
            self._end_loop_tail(n, step, valid, ended)
        states = []
        for c in n.carries:  # last: stacks, last values and the end may read the previous state
            state, new = self.var[c.inner.id], self.var[c.next]
            if self.low.frozen_state(c):
                new = f"torch.where({align_code(valid, ('batch',), c.inner.dims)}, {new}, {state})"
            states.append((state, new))
        self.emit_states(states)
        self.indent -= 1
        if ends:
            self.size_var[axis] = self.ns.fresh(f"{axis}_size")
            self.emit(f"{self.size_var[axis]} = int({self.lens_var[axis]}.max())")
        # padded frames of a stack hold whatever the step computed: ops that mix frames mask their
        # operands themselves (as they do for inputs' padding), outputs and losses are masked at the end
        for s in n.stacks:
            name = self.define(s.out)
            pos = s.out.dims.index(axis)
            # a backward loop's steps stacked, then flipped (ONNX cannot reverse a list: `netc export`)
            flip = f".flip({pos})" if n.reverse else ""
            self.emit(f"{name} = torch.stack({stack_lists[s.out.id]}, dim={pos}){flip}")
            if ends:
                self.emit(f"{name} = {name}.narrow({pos}, 0, {self.size_var[axis]})")
        self.gather_lasts(n)

    def gather_lasts(self, n: Loop) -> None:
        """States and last values read after a forward loop, taken from the stack of the same
        value at each sequence's last step (instead of a `torch.where` in every step)."""
        stack_of = self.low.stack_of
        wanted = [(c.out, stack_of(c), self.var[c.init]) for c in n.carries if stack_of(c) is not None]
        wanted += [(ll.out, stack_of(ll), None) for ll in n.lasts if stack_of(ll) is not None]
        if not wanted:
            return
        lens, batch = self.lens_var[n.axis], self.size_var["batch"]
        rows, last = self.ns.fresh("rows"), self.ns.fresh("last_step")
        # two index tensors, not a tuple of them in a variable, which TorchScript cannot index with
        self.emit(f"{rows}, {last} = torch.arange({batch}, device={self.device()}), ({lens} - 1).clamp(min=0)")
        for out, stack, init in wanted:
            stacked = self.var[stack]
            name = self.define(out)
            ran = align_code(f"({lens} > 0)", ("batch",), out.dims)
            if init is None:  # a sequence without steps: zeros, as RETURNN's last frame of nothing
                self.emit(
                    f"{name} = {zeroed(f'{stacked}[{rows}, {last}]', ran, out.dtype)}  # each sequence's last step"
                )
            else:  # ... its state before the loop
                self.emit(
                    f"{name} = torch.where({ran}, {stacked}[{rows}, {last}], {init})  # each sequence's last step"
                )

    def _end_loop_head(self, n: Loop, step: str, valid: str) -> str:
        """`while` until every sequence has ended (or reached its step limit)."""
        ended = self.ns.fresh("ended")
        lens = self.lens_var[n.axis] = self.ns.fresh(f"{n.axis}_lens")
        batch, device = self.size_var["batch"], self.device()
        self.emit(f"{ended} = torch.zeros({batch}, dtype=torch.bool, device={device})")
        self.emit(
            f"{lens} = torch.zeros({batch}, dtype=torch.long, device={device})"
            f"  # steps each sequence ran: its length of {plain_text(n.axis)}"
        )
        self.emit(f"{step} = 0")
        # a constant limit is the loop's (`tensor & (t < 5)` would be an int64 tensor in TorchScript)
        self.emit(f"while {step} < {n.max_steps}:" if n.max_steps is not None else "while True:")
        self.indent += 1
        limit = f" & ({step} < {self.var[n.bound]})" if n.bound is not None else ""
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


def param_attrs(params: list[ParamDef]) -> dict[tuple[str, str], str]:
    """(module path, role) → attribute path on the module (`cell.ff_linear.W`): the module path's
    segments, renamed where one would shadow a member of nn.Module or of the generated class, or
    where a parameter and a sub-module of one container would share a name."""
    spaces: dict[str, Namespace] = {}  # container attribute path -> names taken in it
    chosen: dict[tuple[str, str, bool], str] = {}  # (container, segment, is a parameter) -> attribute
    out = {}
    for p in params:
        parts = [*p.path.split("/"), p.role]
        attr = ""
        for i, seg in enumerate(parts):
            key = (attr, seg, i == len(parts) - 1)
            if key not in chosen:
                ns = spaces.setdefault(attr, Namespace(NN_MODULE_MEMBERS | GENERATED_MEMBERS, python=False))
                chosen[key] = ns.fresh(seg)
            attr = f"{attr}.{chosen[key]}" if attr else chosen[key]
        out[(p.path, p.role)] = attr
    return out
