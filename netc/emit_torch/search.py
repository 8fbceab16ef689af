"""The torch module's `search` method: the choice loop as a beam search.

Everything the choice loop needs is computed as in `forward` (values needing a target are
not); then every sequence has `beam` hypotheses, rows of a [batch * beam] batch. Each step
runs the loop body on them; the `choice` picks the best continuations (`ops.search`) and
from then on this step's values are those of the hypotheses they continue (`x[src]`, done
where a value is first read after the choice). A hypothesis ends where the loop's `end`
holds (or at its bound); the loop stops when all have ended. Each sequence's best hypothesis
is then followed back through the steps to stack its frames. With `--loops scan` a beam loop
with a step limit is torch's `while_loop` instead (`search_scan`: what `torch.export` keeps).
"""

from __future__ import annotations

import re

from netc.emit_torch.emitter import ModuleNames, TorchEmitter, _OpCtx, zeroed
from netc.emit_torch.scan import beam_buffers, beam_while
from netc.ir.loopkinds import choice_op, choice_ops, chooses, target_seqs
from netc.ir.model import Graph, Loop, Op
from netc.ir.search import BATCH_SIZE, SCORES, SearchPlan
from netc.ir.uses import node_uses
from netc.naming import lens_name, plain_text, py_str
from netc.ops import REGISTRY
from netc.ops.align import align_code, where_valid
from netc.ops.defs import dims_attr_names
from netc.ops.dot_torch import dot_grouped_code


class SearchEmitter(TorchEmitter):
    def __init__(self, g: Graph, names: ModuleNames, public: list[str], plan: SearchPlan):
        super().__init__(g, names, public)
        self.plan = plan
        # after the step's choices: each new hypothesis' source row among the step's first
        self.src: str | None = None
        # values of older hypotheses not yet re-selected -> the rows to take (`ref`)
        self.pending: dict[int, str] = {}
        self.composed: dict[tuple[str, str], str] = {}  # (older src, newer src) -> the two in one
        self.beam_masks: dict[str, str] = {}  # inside the beam loop: masks for [batch * beam] rows
        self.beam: _Beam | None = None
        self.step_values: set[int] = set()  # values of the beam loop's body (and its states)
        self.top_masks = set(plan.input_dims)  # only these lengths are known at the top
        self.limit: str | None = None  # a beam search as torch's while_loop: its step limit
        self.grown: dict[int, Op] = {}  # there: the states grown into buffers as long as the limit
        # values the beam loop reads from before it: their one row per sequence (not per hypothesis)
        self.per_sequence: dict[int, str] = {}
        self.expanded: set[str] = set()  # their copies per hypothesis
        self.seq_lens: dict[str, str] = {}  # the lengths known before the beam loop, one row per sequence

    def search(self) -> tuple[list[str], str]:
        g, plan = self.g, self.plan
        inputs = [i for i in g.inputs if i.name in plan.inputs]
        params = self.start(inputs, list(plan.input_dims), None if inputs else BATCH_SIZE)
        needed = _needed(g.body, plan.loop)
        for n in g.body:
            if n is plan.loop:
                break
            if isinstance(n, Loop) and any(r.id in needed for r in n.results()):
                self.loop(n)
            elif isinstance(n, Op) and any(o.id in needed for o in n.outs):
                self.op(n)
        results = self.beam_loop(plan.loop)
        self.emit("return {" + ", ".join(f"{py_str(k)}: {v}" for k, v in results) + "}")
        return params, "\n".join(self._unread_copies_dropped())

    def _unread_copies_dropped(self) -> list[str]:
        """The lines, less the copies per hypothesis of values only grouped dots read."""
        text = "\n".join(self.lines)
        unread = {v for v in self.expanded if len(re.findall(rf"(?<![\w.]){v}\b", text)) == 1}
        return [line for line in self.lines if line.strip().split(" = ")[0] not in unread]

    # --- the beam ------------------------------------------------------------------------

    def mask(self, dim: str, dims: tuple[str, ...]) -> str:
        if dim in self.beam_masks:
            return align_code(self.beam_masks[dim], ("batch", dim), dims)
        return super().mask(dim, dims)

    def ref(self, vid: int) -> str:
        """A value as the step's current hypotheses see it (re-selected once after the choice)."""
        if vid in self.pending:
            src = self.pending.pop(vid)
            name = self.ns.fresh(f"{self.var[vid]}_sel")
            self.emit(f"{name} = {self.var[vid]}[{src}]  # of the hypothesis each new one continues")
            self.var[vid] = name
        return self.var[vid]

    def op(self, op: Op) -> None:
        for a in op.args:
            if a in self.pending:
                self.ref(a)
        if self.limit is not None and REGISTRY[op.op].preallocates and op.args[0] in self.grown:
            from netc.emit_torch.search_scan import grow

            grow(self, op, _OpCtx(self, op))
            return
        if op.op == "dot" and (code := self._grouped_dot(op)) is not None:
            self.op_line(op, code)
            return
        if not chooses(op):
            super().op(op)
            return
        # what the step computed so far belongs to the old hypotheses; a second choice of the step
        # extends the hypotheses the one before made (`first`: only the step's first choice
        # starts from the hypotheses as they began the step)
        name = self.define(op.outs[0], op.outs[0].name or "label")
        src, before = self.ns.fresh("src"), self.src
        b = self.beam
        first = "" if before is None else ", False"
        self.emit(
            f"{name}, {b.scores}, {src} = {self.names.beam_fn}({self.var[op.args[0]]}, {b.scores}, "
            f"{b.ended}, {b.step}, {b.size}, {op.attrs['length_normalization']!r}{_draws(op)}{first})"
            f"  # line {op.span.line}"
        )
        self.emit(f"{b.ended}, {b.lens} = {b.ended}[{src}], {b.lens}[{src}]")
        self.op_lines[op.outs[0].id] = self.lines[-2].strip()
        self.pending = {
            v: src if v not in self.pending else self._composed(self.pending[v], src)
            for v in set(self.var) & self.step_values
            if v != op.outs[0].id
        }
        self.src = src if before is None else self._composed(before, src)

    def start_step(self) -> None:
        """Before a step of the beam loop: no choice made yet."""
        self.src, self.pending = None, {}

    def _composed(self, older: str, newer: str) -> str:
        """The rows of `older`'s hypotheses that `newer`'s continue: `older[newer]`."""
        if (older, newer) not in self.composed:
            name = self.composed[(older, newer)] = self.ns.fresh("src")
            self.emit(f"{name} = {older}[{newer}]  # the rows before both choices")
        return self.composed[(older, newer)]

    def _grouped_dot(self, op: Op) -> str | None:
        """A step's `dot` of a hypothesis' vector with what the loop reads from before it (the
        keys, the encoder states), against that value's one row per sequence: each sequence's
        hypotheses as one block (`dot_grouped_code`), not one product per repeated row."""
        axes = dims_attr_names(op.attrs["reduce"])
        shared = [i for i, a in enumerate(op.args) if a in self.per_sequence]
        if len(axes) != 1 or len(shared) != 1 or self.beam is None:
            return None
        (r,), (i,) = axes, shared
        dynamic = self.g.dim(r).kind == "dynamic"
        if i == 0 and dynamic:  # the dot masks its first operand's padded frames: per hypothesis here
            return None
        h = self.ref(op.args[1 - i])
        h_dims = self.values[op.args[1 - i]].dims
        if i == 1 and dynamic:  # as `dot` does: padded frames may hold anything
            h = where_valid(h, self.mask(r, h_dims), "0.0")
        s, s_dims = self.per_sequence[op.args[i]], self.values[op.args[i]].dims
        return dot_grouped_code(h, h_dims, s, s_dims, r, op.outs[0].dims, self.beam.size)

    def beam_loop(self, n: Loop) -> list[tuple[str, str]]:
        """The choice loop as a beam search; the search's results (name, variable)."""
        choice = choice_op(n)
        assert choice is not None, "the search graph keeps its loop's choice"
        batch, size = self.size_var["batch"], str(choice.attrs["beam"])
        self.emit(f"# beam search over {plain_text(n.axis)} (line {n.span.line}): {size} hypotheses per sequence")
        if beam_buffers(self.low, n):
            from netc.emit_torch.search_scan import step_limit

            self.limit = step_limit(self, n)
        bound = self._expand_into_beam(n, size)
        beam = self.beam = _Beam(self, size)
        self.emit(f"{beam.scores} = torch.zeros({batch}, {size}, dtype={self.dtype()}, device={self.device()})")
        self.emit(f"{beam.ended} = torch.zeros({beam.rows}, dtype=torch.bool, device={self.device()})")
        self.emit(f"{beam.lens} = torch.zeros({beam.rows}, dtype=torch.long, device={self.device()})")
        # the steps of what a search returns: each output stacked in the loop
        outputs = {o.name: o.value for o in self.g.outputs if o.name in self.plan.outputs}
        stacks = {s.out.id: s for s in n.stacks if s.out.id in outputs.values()}
        self.step_values = {c.inner.id for c in n.carries} | {
            o.id for nd in n.body if isinstance(nd, Op) for o in nd.outs
        }
        if beam_while(self.low, n):
            from netc.emit_torch.search_scan import beam_while_loop

            return beam_while_loop(self, n, beam, bound, batch, outputs, stacks, choice)
        steps = {vid: self.ns.fresh(f"{s.name}_steps") for vid, s in stacks.items()}
        for name in [beam.srcs, *steps.values()]:
            self.emit(f"{name} = []")
        self.emit(f"{beam.step} = 0")
        self.emit(f"while not bool({beam.ended}.all()):")
        self.indent += 1
        # the loop's own variables: a carry read after the choice is re-selected under a new name
        carried = {c.inner.id: self.var[c.inner.id] for c in n.carries}
        self.start_step()
        self.block(n.body)
        # a hypothesis ends where the loop's end holds, or at its sequence's bound
        end = self.ref(n.end)
        if bound is not None:  # `choice` loops keep the ending step
            at = self.ns.fresh("at_limit")
            limit = f"({beam.step} + 1 >= {bound})"
            if n.bound is None:  # a constant: not a Python bool (with a tensor, `|` is int64 in TorchScript)
                limit = f"(torch.full_like({beam.lens}, {beam.step} + 1) >= {bound})"
            self.emit(f"{at} = {end} | {limit}")
            end = at
        self.emit(f"{beam.lens} = {beam.lens} + (~{beam.ended}).long()  # steps each hypothesis ran")
        self.emit(f"{beam.ended} = {beam.ended} | {end}")
        for vid, name in steps.items():
            self.emit(f"{name}.append({self.ref(stacks[vid].value)})")
        self.emit(f"{beam.srcs}.append({self.src})")
        nexts = [self.ref(c.next) for c in n.carries]  # re-selected before any state changes
        self.emit_states([(carried[c.inner.id], new) for c, new in zip(n.carries, nexts)])
        self.emit(f"{beam.step} += 1")
        self.indent -= 1
        self.size_var["batch"] = batch
        return self._best(n, beam, {out: stacks[vid] for out, vid in outputs.items()}, steps, choice)

    def _expand_into_beam(self, n: Loop, size: str) -> str | None:
        """What the loop reads from before it, once per hypothesis; the step limit, if any."""
        rows = self.ns.fresh("rows")
        self.emit(f"{rows} = {self.size_var['batch']} * {size}  # the hypotheses of sequence b are rows b * {size} ...")

        def expand(var: str, hint: str) -> str:
            name = self.ns.fresh(f"{hint}_beam")
            self.emit(f"{name} = {var}.repeat_interleave({size}, dim=0)")
            return name

        def expand_value(var: str) -> str:  # dropped if only grouped dots read it (`_grouped_dot`)
            name = expand(var, var)
            self.expanded.add(name)
            return name

        self.seq_lens = dict(self.lens_var)
        for d in list(self.lens_var):
            self.lens_var[d] = expand(self.lens_var[d], lens_name(d))
            self.beam_masks[d] = self.ns.fresh(f"{d}_mask_beam")
            self.emit(f"{self.beam_masks[d]} = {self.names.mask_fn}({self.lens_var[d]}, {self.size_var[d]})")
        for inv in n.invariants:
            self.values[inv.inner.id] = inv.inner
            outer = self.var[inv.outer]
            self.var[inv.inner.id] = expand_value(outer) if "batch" in inv.inner.dims else outer
            if "batch" in inv.inner.dims:
                self.per_sequence[inv.inner.id] = outer
        grown = self.grown = _grown(n) if self.limit is not None else {}
        for c in n.carries:
            self.values[c.inner.id] = c.inner
            self.var[c.inner.id] = name = self.ns.fresh(c.name)
            if c.inner.id in grown:  # no frames yet: a buffer as long as the step limit
                axis = grown[c.inner.id].attrs["axis"]
                sizes = tuple({"batch": rows, axis: self.limit}.get(d) or self.size(d) for d in c.inner.dims)
                self.emit(f"{name} = {self.zeros_of(sizes, c.inner.dtype)}  # its frames so far, written at each step")
                continue
            many = f".repeat_interleave({size}, dim=0)" if "batch" in c.inner.dims else ""
            self.emit(f"{name} = {self.var[c.init]}{many}")
        self.size_var["batch"] = rows
        if n.bound is not None:
            return expand(self.var[n.bound], self.var[n.bound])
        return str(n.max_steps) if n.max_steps is not None else None

    def leave_beam(self, axis: str) -> list[tuple[str, str]]:
        """After the beam loop, the lengths of each sequence again (not of each hypothesis); the
        results that give those of the dims the search returns besides the loop's `axis`."""
        self.lens_var.update(self.seq_lens)
        self.beam_masks.clear()
        # the target's dim may also be a searched input's (a transducer's alignment over the encoder's
        # frames): from here on its mask is the best hypotheses', not the input's
        self.top_masks.discard(axis)
        return [(key, self.seq_lens[d]) for d, key in self.plan.made_lens.items() if d != axis]

    def zero_padding(self, name: str, dims: tuple[str, ...], dtype: str) -> None:
        """A result with zeros in the padded frames of each of its dynamic dims."""
        for d in dims:
            if self.g.dim(d).kind == "dynamic":
                self.emit(f"{name} = {zeroed(name, self.mask(d, dims), dtype)}  # zero padded frames")

    def _best(self, n: Loop, beam: _Beam, outputs: dict, steps: dict[int, str], choice: Op) -> list[tuple[str, str]]:
        """Each sequence's best hypothesis, followed back step by step."""
        axis, batch, size = n.axis, self.size_var["batch"], beam.size
        made = self.leave_beam(axis)
        hyp, best = self.ns.fresh("hyp"), self.ns.fresh("best")
        self.emit(f"{best} = torch.arange({batch}, device={self.device()}) * {size} + {beam.scores}.argmax(dim=1)")
        self.lens_var[axis] = lens = self.ns.fresh(lens_name(axis))
        self.emit(f"{lens} = {beam.lens}[{best}]")
        self.size_var[axis] = self.ns.fresh(f"{axis}_size")
        self.emit(f"{self.size_var[axis]} = len({beam.srcs})")
        frames = {out: self.ns.fresh(f"{s.name}_best") for out, s in outputs.items()}
        for name in frames.values():
            self.emit(f"{name} = []")
        t = self.ns.fresh("t")
        self.emit(f"{hyp} = {best}")
        self.emit(f"for {t} in range({self.size_var[axis]} - 1, -1, -1):  # from the last step back")
        for out, s in outputs.items():
            self.emit(f"    {frames[out]}.append({steps[s.out.id]}[{t}][{hyp}])")
        self.emit(f"    {hyp} = {beam.srcs}[{t}][{hyp}]  # the hypothesis it continued")
        results = []
        for out, s in outputs.items():
            name = self.ns.fresh(s.name)
            pos = s.out.dims.index(axis)  # stacked from the last step back, then flipped (ONNX cannot reverse a list)
            self.emit(f"{name} = torch.stack({frames[out]}, dim={pos}).flip({pos})")
            self.zero_padding(name, s.out.dims, s.out.dtype)
            results.append((out, name))
        scores = self.ns.fresh("scores")
        # as RETURNN: the sum of log-probabilities per step, where the step's last choice normalises
        if choice_ops(n)[-1].attrs["length_normalization"]:
            self.emit(f"{scores} = {beam.scores}.amax(dim=1) / {beam.step}  # the best hypotheses' scores")
        else:
            self.emit(f"{scores} = {beam.scores}.amax(dim=1)  # the best hypotheses' scores")
        return [*results, (lens_name(axis), lens), *made, (SCORES, scores)]


class _Beam:
    """The search's own variables."""

    def __init__(self, em: SearchEmitter, size: str):
        self.size = size
        self.rows = em.size_var["batch"]  # batch * beam
        self.srcs = em.ns.fresh("src_steps")
        self.scores = em.ns.fresh("beam_scores")
        self.ended = em.ns.fresh("ended")
        self.lens = em.ns.fresh("lens")
        self.step = em.ns.fresh("t")


def _grown(n: Loop) -> dict[int, Op]:
    """The states of `n` an op grows (`OpDef.preallocates`, as `scan_loops` allows): state -> op."""
    return {m.args[0]: m for m in n.body if isinstance(m, Op) and REGISTRY[m.op].preallocates}


def _needed(body: list, loop: Loop) -> set[int]:
    """Top-level values the loop needs, directly or not: what it reads, and what gives the
    lengths of the dims its values have (a `max_pool` whose result only an `expand` names)."""
    training_only = {s.outer for s in target_seqs(loop)}  # a target the search has not
    needed = set(node_uses(loop)) - training_only
    dims = _dims_of([loop])
    for n in reversed(body[: body.index(loop)]):
        outs = n.results() if isinstance(n, Loop) else n.outs
        makes = isinstance(n, Op) and bool(set(REGISTRY[n.op].makes_dims(n.attrs)) & dims)
        if makes or any(o.id in needed for o in outs):
            needed.update(o.id for o in outs)
            needed.update(node_uses(n))
            dims |= _dims_of([n])
    return needed


def _dims_of(nodes: list) -> set[str]:
    """The dims of the values these nodes (and their loops' bodies) make."""
    out: set[str] = set()
    for n in nodes:
        if isinstance(n, Loop):
            out |= _dims_of(n.body)
            out |= {d for v in n.results() for d in v.dims}
        else:
            out |= {d for v in n.outs for d in v.dims}
    return out


def _draws(op: Op) -> str:
    """A sampling search's step also takes the draws' seed and the first sequence's index."""
    return f", {op.attrs['seed']}, 0" if op.attrs.get("sample") else ""
