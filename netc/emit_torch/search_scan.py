"""The beam search of `search` as torch's `while_loop` (a search emitted with `--loops scan`).

`torch.export` unrolls a Python loop at the example's length, so a search that deploys runs
its steps as the operator: the beam's state (scores, ended flags, lengths, the loop's states
for the [batch * beam] hypotheses) is carried with fixed shapes, and what each step stacks
(the labels and outputs of every hypothesis, and the hypothesis each continues) is written
into buffers preallocated to the step limit. A second `while_loop` then follows each
sequence's best hypothesis back from the last step, and the results are narrowed to the
steps the search ran. Each step computes what the Python loop's body does, line for line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from netc.emit_torch.scan import WHILE_HELPER, _paren, _unpack, beam_while
from netc.ir.loopkinds import choice_ops
from netc.ir.model import Loop, Op
from netc.ir.search import SCORES
from netc.naming import lens_name, plain_text
from netc.ops import REGISTRY
from netc.ops.align import align_code

if TYPE_CHECKING:
    from netc.emit_torch.search import SearchEmitter, _Beam


def step_limit(em: SearchEmitter, n: Loop) -> str:
    """The most steps the search runs (the length of its buffers): a variable."""
    limit = em.ns.fresh("max_steps")
    if n.bound is not None:
        most = f"{em.var[n.bound]}.max()"
        if em.values[n.bound].dtype.startswith("float"):
            most = f"{most}.ceil().long()"
        # `.item()`, not `int()`: a number torch.export keeps unknown (`int` would fix it); each
        # hypothesis ends at its sequence's bound, and the first step always runs. A Python
        # `while` (scripted: `.item()` is no int there) takes `int()`
        most = f"{most}.clamp(min=1)"
        em.emit(
            f"{limit} = {most + '.item()' if em.low.scanned(n) else f'int({most})'}  # the most steps the search runs"
        )
    else:
        em.emit(f"{limit} = {max(1, n.max_steps)}  # the most steps the search runs")
    return limit


def grow(em: SearchEmitter, op: Op, ctx) -> None:
    """A state's growth in the beam loop with buffers: the step's frame written into its buffer."""
    axis = op.attrs["axis"]
    em.lens_var[axis], em.size_var[axis] = em.ns.fresh(lens_name(axis)), em.ns.fresh(f"{axis}_size")
    steps = f"torch.zeros_like({em.beam.ended}, dtype=torch.long) + ({em.beam.step} + 1)"
    em.emit(f"{em.lens_var[axis]} = {steps}  # lengths of {plain_text(axis)}: the steps so far")
    # the step limit, from the buffer (the number itself, unknown to torch.export, may not be read here)
    em.emit(f"{em.size_var[axis]} = {ctx.arg(0)}.shape[{op.outs[0].dims.index(axis)}]")
    step = em.beam.step  # a tensor in torch's while_loop, an int in a Python `while` (`buffers`)
    if not beam_while(em.low, em.plan.loop):
        step = f"torch.tensor({step}, device={em.device()})"
    em.op_line(op, REGISTRY[op.op].torch_preallocated(ctx, op, step))


def beam_while_loop(
    em: SearchEmitter, n: Loop, beam: _Beam, bound: str | None, batch: str, outputs: dict, stacks: dict, choice: Op
) -> list[tuple[str, str]]:
    """Emit the beam loop `n` (its hypotheses set up by `SearchEmitter.beam_loop`); the
    search's results (name, variable)."""
    axis, device, size, limit = n.axis, em.device(), beam.size, em.limit
    em.emit("# each step as torch's while_loop, until every hypothesis has ended")
    em.emit(f"{beam.step} = torch.zeros((), dtype=torch.long, device={device})")
    # [step, batch, beam, ...]: a buffer's strides may not be products of the rows' number (a
    # size torch.export derives), which it would not match from step to step
    srcs = em.ns.fresh("src_buffer")
    em.emit(f"{srcs} = torch.zeros({limit}, {batch}, {size}, dtype=torch.long, device={device})")
    buffers = {}
    for vid, s in stacks.items():
        buffers[vid] = em.ns.fresh(f"{s.name}_buffer")
        frame = tuple(em.size(d) for d in _rest(s, axis))
        em.emit(f"{buffers[vid]} = {em.zeros_of((limit, batch, size, *frame), s.out.dtype)}")
    carries = {c.inner.id: em.var[c.inner.id] for c in n.carries}
    carried = [beam.step, beam.ended, beam.lens, beam.scores, *carries.values(), srcs, *buffers.values()]
    cond_fn, step_fn, carry = em.ns.fresh(f"{axis}_running"), em.ns.fresh(f"{axis}_step"), em.ns.fresh("carry")
    em.emit(f"def {cond_fn}({carry}: list[torch.Tensor]):")
    em.emit(f"    return ~{carry}[1].all()  # [{beam.ended}]: until every hypothesis has ended")
    em.emit(f"def {step_fn}({carry}: list[torch.Tensor]):")
    em.indent += 1
    em.emit(f"{_unpack(carried)} = {carry}")
    em.start_step()
    em.block(n.body)
    # a hypothesis ends where the loop's end holds, or at its sequence's bound
    end = em.ref(n.end)
    if bound is not None:
        at = em.ns.fresh("at_limit")
        em.emit(f"{at} = {end} | ({beam.step} + 1 >= {bound})")  # `choice` loops keep the ending step
        end = at
    em.emit(f"{beam.lens} = {beam.lens} + (~{beam.ended}).long()  # steps each hypothesis ran")
    em.emit(f"{beam.ended} = {beam.ended} | {end}")
    at_step = f"{beam.step}.reshape(1)"
    written = [f"{srcs}.index_copy(0, {at_step}, {em.src}.unflatten(0, (-1, {size})).unsqueeze(0))"]
    for vid, s in stacks.items():
        frame = align_code(_paren(em.ref(s.value)), em.values[s.value].dims, ("batch", *_rest(s, axis)))
        written.append(f"{buffers[vid]}.index_copy(0, {at_step}, {frame}.unflatten(0, (-1, {size})).unsqueeze(0))")
    nexts = [f"{beam.step} + 1", beam.ended, beam.lens, beam.scores, *(em.ref(c.next) for c in n.carries), *written]
    em.emit("return [  # the carried values' next values: copies (the operator forbids aliasing)")
    for x in nexts:
        em.emit(f"    {_paren(x)}.clone(memory_format=torch.contiguous_format),")
    em.emit("]")
    em.indent -= 1
    loop = em.names.helpers[WHILE_HELPER]
    em.emit(f"{_unpack(carried)} = {loop}({cond_fn}, {step_fn}, [{', '.join(carried)}])")
    em.size_var["batch"] = batch
    return _best(em, n, beam, limit, srcs, {out: (stacks[vid], buffers[vid]) for out, vid in outputs.items()}, choice)


def _best(em: SearchEmitter, n: Loop, beam: _Beam, limit: str, srcs: str, outputs: dict, choice: Op):
    """Each sequence's best hypothesis, followed back from the last step by a second `while_loop`."""
    axis, batch, size, device = n.axis, em.size_var["batch"], beam.size, em.device()
    made = em.leave_beam(axis)
    best = em.ns.fresh("best")
    em.emit(f"{best} = torch.arange({batch}, device={device}) * {size} + {beam.scores}.argmax(dim=1)")
    em.lens_var[axis] = lens = em.ns.fresh(lens_name(axis))
    em.emit(f"{lens} = {beam.lens}[{best}]")
    steps = em.size_var[axis] = em.ns.fresh(f"{axis}_size")
    em.emit(f"{steps} = {beam.step}.item()  # the steps the search ran")
    frames = {}
    for out, (s, _) in outputs.items():
        frames[out] = em.ns.fresh(f"{s.name}_best")
        frame = tuple(em.size(d) for d in _rest(s, axis))
        em.emit(f"{frames[out]} = {em.zeros_of((limit, batch, *frame), s.out.dtype)}")
    k, hyp = em.ns.fresh("k"), em.ns.fresh("hyp")
    carried = [k, hyp, *frames.values()]
    cond_fn, step_fn, carry = em.ns.fresh(f"{axis}_back"), em.ns.fresh(f"{axis}_follow"), em.ns.fresh("carry")
    em.emit(f"def {cond_fn}({carry}: list[torch.Tensor]):")
    em.emit(f"    return {carry}[0] > 0  # from the last step back to the first")
    em.emit(f"def {step_fn}({carry}: list[torch.Tensor]):")
    em.indent += 1
    em.emit(f"{_unpack(carried)} = {carry}")
    em.emit(f"{k} = {k} - 1")
    at = f"{k}.reshape(1)"
    nexts = [k, f"{srcs}.index_select(0, {at}).flatten(1, 2)[0, {hyp}]  # the hypothesis it continued"]
    nexts += [
        f"{frames[out]}.index_copy(0, {at}, {buf}.index_select(0, {at}).flatten(1, 2)[:, {hyp}])"
        for out, (_, buf) in outputs.items()
    ]
    em.emit("return [")
    for x in nexts:
        x, _, comment = x.partition("  # ")
        em.emit(f"    {_paren(x)}.clone(memory_format=torch.contiguous_format),{'  # ' + comment if comment else ''}")
    em.emit("]")
    em.indent -= 1
    em.emit(
        f"{_unpack(carried)} = {em.names.helpers[WHILE_HELPER]}({cond_fn}, {step_fn}, [{beam.step}, {best}, {', '.join(frames.values())}])"
    )
    results = []
    for out, (s, _) in outputs.items():
        name = em.ns.fresh(s.name)
        frame = align_code(f"{frames[out]}.narrow(0, 0, {steps})", (axis, "batch", *_rest(s, axis)), s.out.dims)
        em.emit(f"{name} = {frame}")
        em.zero_padding(name, s.out.dims, s.out.dtype)
        results.append((out, name))
    scores = em.ns.fresh("scores")
    # as RETURNN: the sum of log-probabilities per step, where the step's last choice normalises
    if choice_ops(n)[-1].attrs["length_normalization"]:
        em.emit(f"{scores} = {beam.scores}.amax(dim=1) / {beam.step}  # the best hypotheses' scores")
    else:
        em.emit(f"{scores} = {beam.scores}.amax(dim=1)  # the best hypotheses' scores")
    return [*results, (lens_name(axis), lens), *made, (SCORES, scores)]


def _rest(s, axis: str) -> tuple[str, ...]:
    """A stacked value's dims but the loop's and the batch."""
    return tuple(d for d in s.out.dims if d not in (axis, "batch"))
