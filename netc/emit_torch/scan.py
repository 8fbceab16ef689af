"""A loop as torch's `scan` operator (`TorchDecisions.scan`, `--loops scan`).

The step is a function of the carried values (states, and values read after the loop) and of
the step's frames, returning the next carried values and the frames to stack. `torch.export`
and `torch.compile` keep it one operator whatever the trip count, so exported modules run at
any length and compiling does not unroll; run eagerly, the helper loops in Python. The step computes what the Python loop's body does,
line for line; only the frame, the step number and the stacking move to `scan`'s arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from netc.emit_torch.decisions import TorchDecisions
from netc.ir.model import Loop
from netc.naming import plain_text
from netc.ops.align import align_code

if TYPE_CHECKING:
    from netc.emit_torch.emitter import TorchEmitter

SCAN_HELPER = "_scan"


def scan_helper(name: str) -> str:
    return f'''def {name}(step, init: list[torch.Tensor], xs: list[torch.Tensor], reverse: bool = False):
    """torch's `scan` operator: `step(carried, frames)` over the frames of `xs` (dim 0), from
    `init`; the last carried values and the stacked frames `step` returns. Traced by
    torch.export or torch.compile it is the operator (one loop, any length: torch 2.13 has it
    as a prototype only here); run eagerly, a Python loop, which is faster then."""
    if not torch.compiler.is_compiling():
        carried, steps = init, []
        n = xs[0].shape[0]
        for t in range(n - 1, -1, -1) if reverse else range(n):
            carried, frames = step(carried, [x[t] for x in xs])
            steps.append(frames)
        if reverse:
            steps.reverse()
        return carried, [torch.stack([frames[i] for frames in steps]) for i in range(len(steps[0]) if steps else 0)]
    from torch._higher_order_ops.scan import scan

    # scan's arguments may not alias one another or a tensor the step reads, and a carried
    # value keeps its strides from step to step: copies (the step returns contiguous copies)
    init = [x.clone(memory_format=torch.contiguous_format) for x in init]
    return scan(step, init, [x.clone() for x in xs], reverse=reverse)
'''


WHILE_HELPER = "_while"


def while_helper(name: str) -> str:
    return f'''def {name}(cond, body, carried: list[torch.Tensor]):
    """torch's `while_loop` operator: `body(carried)` while `cond(carried)` holds; the last
    carried values. Traced by torch.export or torch.compile it is the operator (any number of
    steps); run eagerly, a Python loop."""
    if not torch.compiler.is_compiling():
        while bool(cond(carried)):
            carried = body(carried)
        return carried
    from torch._higher_order_ops.while_loop import while_loop

    # its inputs may not alias one another or a tensor the step reads: copies
    init = tuple(x.clone(memory_format=torch.contiguous_format) for x in carried)
    return list(while_loop(lambda *c: cond(list(c)), lambda *c: tuple(body(list(c))), init))
'''


def beam_while(t: TorchDecisions, n: Loop) -> bool:
    """Whether the beam search of `n` (the loop with `choice`; `t`: its graph's decisions) runs
    as torch's `while_loop`: a scan loop with a step limit (its stacks are preallocated to it)."""
    return t.scanned(n) and n.has_step_limit


def beam_buffers(t: TorchDecisions, n: Loop) -> bool:
    """Whether the beam search of `n` writes its grown states into buffers as long as its step
    limit, its step a tensor: as torch's `while_loop`, or a Python `while` (`buffers`)."""
    return beam_while(t, n) or (t.buffers and n.has_step_limit)


def scan_loop(em: TorchEmitter, n: Loop) -> None:
    """Emit `n` (no `end`: it runs over its dim's padded length) as a step function and `scan`."""
    if n.end is not None and n.target is None:
        while_loop(em, n)
        return
    axis = n.axis
    backwards = ", backwards" if n.reverse else ""
    em.emit(f"# loop over {plain_text(axis)}{backwards} (line {n.span.line}): torch's scan")
    for inv in n.invariants:
        em.alias_value(inv.inner, inv.outer)
    # carried: the states, then the values read after the loop that no stack gives
    carried: list[tuple[str, str]] = []  # (name in the step, its value before the first step)
    for c in n.carries:
        init = em.var[c.init]
        carried.append((em.define(c.inner), init))
        if c.out is not None and em.low.frozen_state(c):
            em.alias_value(c.out, c.inner.id)
    lasts = [ll for ll in n.lasts if em.low.stack_of(ll) is None]
    for ll in lasts:
        v = ll.out
        init = em.var[ll.init] if ll.init is not None else em.zeros(v)
        carried.append((em.define(v), init))
    if not carried:  # scan needs a carried value: the steps run
        carried.append((em.ns.fresh("steps_run"), f"torch.zeros((), dtype={em.dtype()}, device={em.device()})"))
    step_fn, carry, xs = em.ns.fresh(f"{n.name or axis}_step"), em.ns.fresh("carry"), em.ns.fresh("xs")
    step = em.ns.fresh("t")
    valid = em.ns.fresh("valid")
    frames = [(step, f"torch.arange({em.size_var[axis]}, device={em.device()})")]
    for s in n.seqs:
        outer = em.values[s.outer]
        pos = outer.dims.index(axis)
        frame_name = em.define(s.inner, s.inner.name or f"{em.var[s.outer]}_t")
        frames.append((frame_name, f"{em.var[s.outer]}.movedim({pos}, 0)" if pos else em.var[s.outer]))
    em.emit(f"def {step_fn}({carry}: list[torch.Tensor], {xs}: list[torch.Tensor]):")
    em.indent += 1
    em.emit(f"{_unpack([name for name, _ in carried])} = {carry}")
    em.emit(f"{_unpack([name for name, _ in frames])} = {xs}")
    if any(em.low.frozen_state(c) for c in n.carries) or lasts:
        em.emit(f"{valid} = {step} < {em.lens_var[axis]}  # [batch]: sequences still running")
    em.block(n.body)
    nexts = _next_states(em, n, valid) + _next_lasts(em, n, lasts, valid)
    if len(nexts) < len(carried):
        nexts.append(f"{carried[0][0]} + 1")
    stacked = [em.var[s.value] for s in n.stacks]
    # scan's results may not alias its inputs or one another (nor what autograd saves): copies
    nexts = [f"{_paren(x)}.clone(memory_format=torch.contiguous_format)" for x in nexts]
    em.emit(f"return [{', '.join(nexts)}], [{', '.join(f'{_paren(x)}.clone()' for x in stacked)}]")
    em.indent -= 1
    finals = [name for name, _ in carried]
    outs = [em.ns.fresh(f"{s.name}_stacked") for s in n.stacks]
    inits = ", ".join(init for _, init in carried)
    call = f"{em.names.helpers[SCAN_HELPER]}({step_fn}, [{inits}], [{', '.join(x for _, x in frames)}]{', reverse=True' if n.reverse else ''})"
    em.emit(f"{_unpack(finals)}, {_unpack(outs)} = {call}")
    for s, out in zip(n.stacks, outs):
        name = em.define(s.out)
        pos = s.out.dims.index(axis)
        em.emit(f"{name} = {out}.movedim(0, {pos})" if pos else f"{name} = {out}")
    em.gather_lasts(n)


def while_loop(em: TorchEmitter, n: Loop) -> None:
    """Emit `n` (a loop with `end`, a step limit and no frames of its own) as a step function
    and torch's `while_loop`: its stacks are preallocated to the step limit and written at each
    step, then narrowed to the longest sequence's length."""
    axis = n.axis
    em.emit(f"# loop until each sequence ends, new dim {plain_text(axis)} (line {n.span.line}): torch's while_loop")
    for inv in n.invariants:
        em.alias_value(inv.inner, inv.outer)
    batch, device = em.size_var["batch"], em.device()
    limit = em.ns.fresh("max_steps")
    if n.max_steps is not None:
        em.emit(f"{limit} = {n.max_steps}")
    else:  # each sequence's own limit: stacks as long as the longest
        # `.item()`, not `int()`: a number torch.export keeps unknown (`int` would fix it)
        em.emit(f"{limit} = {em.var[n.bound]}.max().clamp(min=0).item()")
    step, ended, valid = em.ns.fresh("t"), em.ns.fresh("ended"), em.ns.fresh("valid")
    lens = em.lens_var[axis] = em.ns.fresh(f"{axis}_lens")
    carried: list[tuple[str, str]] = [
        (step, f"torch.zeros((), dtype=torch.long, device={device})"),
        (ended, f"torch.zeros({batch}, dtype=torch.bool, device={device})"),
        (lens, f"torch.zeros({batch}, dtype=torch.long, device={device})"),
    ]
    for c in n.carries:
        carried.append((em.define(c.inner), em.var[c.init]))
        if c.out is not None and em.low.frozen_state(c):
            em.alias_value(c.out, c.inner.id)
    lasts = [ll for ll in n.lasts if em.low.stack_of(ll) is None]
    for ll in lasts:
        v = ll.out
        carried.append((em.define(v), em.var[ll.init] if ll.init is not None else em.zeros(v)))
    buffers = []
    for s in n.stacks:
        buf = em.ns.fresh(f"{s.name}_buffer")
        frame = tuple(d for d in s.out.dims if d != axis)
        carried.append((buf, em.zeros_of((limit, *(em.size(d) for d in frame)), s.out.dtype)))
        buffers.append(buf)
    running = f"~{ended}" + (f" & ({step} < {em.var[n.bound]})" if n.bound is not None else "")
    cond_fn, step_fn, carry = (
        em.ns.fresh(f"{n.name or axis}_running"),
        em.ns.fresh(f"{n.name or axis}_step"),
        em.ns.fresh("carry"),
    )
    em.emit(f"def {cond_fn}({carry}: list[torch.Tensor]):")
    em.emit(f"    {_unpack([name for name, _ in carried[:2]] + ['_'] * (len(carried) - 2))} = {carry}")
    # a per-sequence limit is in `running` (the step limit, unknown to export, may not be read here)
    em.emit(
        f"    return ({running}).any()" if n.bound is not None else f"    return ({step} < {limit}) & ({running}).any()"
    )
    em.emit(f"def {step_fn}({carry}: list[torch.Tensor]):")
    em.indent += 1
    em.emit(f"{_unpack([name for name, _ in carried])} = {carry}")
    em.emit(f"{valid} = {running}  # [batch]: sequences still running")
    em.block(n.body)
    stacked = [
        f"{buf}.index_copy(0, {step}.reshape(1), {_paren(em.var[s.value])}.unsqueeze(0))"
        for s, buf in zip(n.stacks, buffers)
    ]
    end = em.var[n.end]
    counted = valid if n.include_eos else f"({valid} & ~{end})"
    nexts = [f"{step} + 1", f"{ended} | ({valid} & {end})", f"{lens} + {counted}.long()"]
    nexts += _next_states(em, n, valid) + _next_lasts(em, n, lasts, valid) + stacked
    em.emit("return [  # the carried values' next values: copies (the operator forbids aliasing)")
    for x in nexts:
        em.emit(f"    {_paren(x)}.clone(memory_format=torch.contiguous_format),")
    em.emit("]")
    em.indent -= 1
    inits = ", ".join(init for _, init in carried)
    finals = [name for name, _ in carried]
    em.emit(f"{_unpack(finals)} = {em.names.helpers[WHILE_HELPER]}({cond_fn}, {step_fn}, [{inits}])")
    em.size_var[axis] = em.ns.fresh(f"{axis}_size")
    em.emit(f"{em.size_var[axis]} = {lens}.max().item()")
    for s, buf in zip(n.stacks, buffers):
        name = em.define(s.out)
        pos = s.out.dims.index(axis)
        moved = f"{buf}.movedim(0, {pos})" if pos else buf
        em.emit(f"{name} = {moved}.narrow({pos}, 0, {em.size_var[axis]})")
    em.gather_lasts(n)


def _next_states(em: TorchEmitter, n: Loop, valid: str) -> list[str]:
    """Each state's next value: a frozen one keeps its value for sequences no longer running."""
    out = []
    for c in n.carries:
        state, new = em.var[c.inner.id], em.var[c.next]
        out.append(
            f"torch.where({align_code(valid, ('batch',), c.inner.dims)}, {new}, {state})"
            if em.low.frozen_state(c)
            else new
        )
    return out


def _next_lasts(em: TorchEmitter, n: Loop, lasts: list, valid: str) -> list[str]:
    """Each value read after the loop: this step's where the sequence computed it."""
    out = []
    for ll in lasts:
        keep = f"({valid} & ~{em.var[n.end]})" if ll.after_end else valid
        out.append(f"torch.where({align_code(keep, ('batch',), ll.out.dims)}, {em.var[ll.value]}, {em.var[ll.out.id]})")
    return out


def _paren(x: str) -> str:
    return f"({x})" if " " in x else x


def _unpack(names: list[str]) -> str:
    """An assignment target that unpacks a list of this many tensors."""
    return "[" + ", ".join(names) + "]"
