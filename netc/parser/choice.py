"""`choice` in a decoder loop: the step's label, the target's in training and a beam
search's otherwise (the loop then runs over the target's frames, or makes its axis)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from netc.ir.model import LoopSeq
from netc.ops import REGISTRY
from netc.parser import values as V

# what `choice`'s scores are, as RETURNN's `ChoiceLayer` has it: unnormalised ("logits", netc's
# default: a search adds their `log_softmax`), log-probabilities (added as they are, e.g. an
# acoustic and a language model's fused) or probabilities (their `log`)
INPUT_TYPES = ("logits", "log_prob", "prob")

if TYPE_CHECKING:
    from netc.parser.loops import LoopBuilder


def trace_choice(lb: LoopBuilder, node: ast.Call) -> V.TV:
    """`choice(logits, target=y, beam=K)`: the reference label `y` at this step in training,
    a beam search over the labels otherwise. The loop must end with `if end(...): break`;
    it then runs over `y`'s frames in training, and makes its axis by searching."""
    t = lb.t
    args, kwargs = t.call_args(node)
    try:
        logits, target, beam, length_norm, input_type, sample, seed = _choice_args(*args, **kwargs)
    except TypeError:
        raise t.error(node, "use choice(logits, target=labels, beam=K)") from None
    if input_type not in INPUT_TYPES:
        raise t.error(
            node, f"`input_type` is one of {', '.join(map(repr, INPUT_TYPES))} (RETURNN's), got {input_type!r}"
        )
    ctx = lb.active[-1] if lb.active else None
    if ctx is None or ctx.end is None:
        raise t.error(node, "`choice` belongs in a loop that ends with `if end(cond): break`")
    if len(lb.active) > 1:
        raise t.error(node, "a loop with `choice` cannot be inside another loop")
    if not isinstance(beam, int) or isinstance(beam, bool) or beam < 1:
        raise t.error(node, f"`beam` must be a positive integer, got {beam!r}")
    if not isinstance(length_norm, bool):
        raise t.error(node, "`length_normalization` must be True or False")
    if not isinstance(sample, bool):
        raise t.error(node, "`sample` must be True or False")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**31:
        raise t.error(node, f"`seed` must be an integer in [0, 2**31), got {seed!r}")
    if not isinstance(logits, V.TV) or not isinstance(target, V.TV):
        raise t.error(node, "choice(logits, target=labels, beam=K) takes a tensor and labels")
    # a `Labels` input, or labels computed before the loop (training's only: a search has no
    # targets and computes nothing for them, `netc.ir.search`)
    inp = next((i for i in t.inputs if i.value.id == target.value.id), None)
    if target.value.sparse_dim is None or target.value.dtype != "int32":
        raise t.error(node, "the target of `choice` must be labels: a `Labels[...]` input or a `cast(..., class_dim=)`")
    if inp is None and _inside(target.block, ctx.block):
        raise t.error(node, "the target of `choice` is computed inside its loop; compute it before the loop")
    dyn = t.dims.dynamic(target.dims)
    vocab = target.value.sparse_dim
    if len(dyn) != 1 or set(target.dims) != {"batch", dyn[0]}:
        raise t.error(
            node, f"the target of `choice` must be Labels[batch, time, vocab], got [{', '.join(target.dims)}]"
        )
    if set(logits.dims) != {"batch", vocab} or logits.value.dtype != "float32":
        raise t.error(
            node,
            f"choice scores are float [batch, {vocab}] (the target's class dim), got "
            f"{logits.value.dtype}[{', '.join(logits.dims)}]",
        )
    if ctx.target is not None and (sample or ctx.sample):
        raise t.error(node, "a loop with several choices searches by beam: `sample=True` is for one `choice` per loop")
    if ctx.target is not None and (dyn[0] != ctx.target[1] or beam != ctx.beam):
        # a second choice of the step extends the hypotheses the first made: one beam, one axis
        raise t.error(
            node,
            f"the choices of one loop share its dim and beam: this one's target is over `{dyn[0]}` with "
            f"beam {beam}, the loop's first choice's over `{ctx.target[1]}` with beam {ctx.beam}",
        )
    outer = lb.capture(target, ctx.block.parent, node)
    if ctx.target is None:  # the loop runs over the first choice's target
        ctx.target, ctx.beam, ctx.sample = (target, dyn[0]), beam, sample
        ctx.loop.target = outer.value.id
    elif outer.value.id in ctx.chosen_targets:  # (a step read `y[i]` of it is no choice)
        raise t.error(node, "two choices of one loop take the same target")
    ctx.chosen_targets.add(outer.value.id)
    frame = t.new_value(("batch",), "int32", sparse_dim=vocab)
    ctx.loop.seqs.append(LoopSeq(outer=outer.value.id, inner=frame))
    logp = logits  # "log_prob": the model's own log-probabilities, used as they are
    if input_type == "logits":
        (logp,) = t.emit(REGISTRY["log_softmax"], [logits], {"axis": vocab}, node)
    elif input_type == "prob":
        (logp,) = t.emit(REGISTRY["log"], [logits], {}, node)
    if input_type != "logits" and t.dims[vocab].kind == "dynamic":
        # positions in an encoder's frames: a padded frame is never chosen (`log_softmax` masks them)
        (logp,) = t.emit(REGISTRY["mask_padding"], [logp], {"axis": vocab}, node)
    # `target`: the input's name (RETURNN's data key), None for a computed target
    attrs = {"target": inp.name if inp is not None else None, "beam": beam, "length_normalization": length_norm}
    if sample:  # searching draws `beam` labels sequences instead (`ops.search.torch_sample_step`)
        attrs |= {"sample": True, "seed": seed}
    (label,) = t.emit(REGISTRY["choice"], [logp, V.TV(frame, ctx.block)], attrs, node)
    return label


def _inside(block: V.Block | None, loop_block: V.Block) -> bool:
    while block is not None:
        if block is loop_block:
            return True
        block = block.parent
    return False


def _choice_args(logits, target, beam, length_normalization=True, input_type="logits", sample=False, seed=0):
    return logits, target, beam, length_normalization, input_type, sample, seed
