"""Eager mode's `ctc_prefix_search` with an LM function: the user's `lm` runs literally, one
prefix at a time (a batch of one, as every eager op), inside the search the torch module runs
(`netc.ops.ctc_search.ctc_prefix_beam_search_lm`, the one definition of the algorithm)."""

from __future__ import annotations

import torch

from netc.ir.model import Value
from netc.ops import REGISTRY
from netc.ops.ctc_decode import flashlight_options
from netc.ops.ctc_search import ctc_flashlight_search_lm, ctc_prefix_beam_search_lm
from netc_runtime import eager as E
from netc_runtime.eager_search_calls import StepState, stacked


def ctc_prefix_search_lm(
    logits, axis, beam, out_axis, lm, lm_weight, lm_state, bos, options: dict
) -> tuple[E.ETensor, E.ETensor]:
    run = E._run()
    logits, state = stacked(logits), StepState.of(lm_state)
    if any(isinstance(a, E.Absent) for a in [logits, *state.states]):  # searching: computed from a target
        return E.ABSENT, E.ABSENT
    logits, version = state.align(run, logits)
    states = state.states
    attrs = {"axis": axis.name, "beam": beam, "out_axis": out_axis.name, "lm_weight": lm_weight, "bos": bos, **options}
    vals = [Value(id=0, dims=a.dims, dtype=E._dtype(a.data), sparse_dim=a.sparse_dim) for a in [logits, *states]]
    outs = REGISTRY["ctc_prefix_search"].infer(run.net.dims, vals, attrs)
    vocab = outs[0].sparse_dim
    time = next(d for d in logits.dims if d not in ("batch", axis.name))
    data = logits.data.permute([logits.dims.index(d) for d in ("batch", time, axis.name)])
    frames = run.frames()

    def log_probs(out) -> torch.Tensor:
        if not isinstance(out, E.ETensor) or set(out.dims) != {"batch", vocab}:
            raise TypeError(f"`lm` must return log probabilities [batch, {vocab}] and the state")
        return out.data.permute([out.dims.index(d) for d in ("batch", vocab)])

    args = (
        data,
        torch.full((data.shape[0],), data.shape[1]),
        beam,
        state.rows(lm, "lm", frames, vocab, log_probs),
        tuple(s.data for s in states),
        bos,
        float(lm_weight),
    )
    if options["method"] == "flashlight":
        labels, _, score = ctc_flashlight_search_lm(*args, *flashlight_options(options))
    else:
        labels, _, score = ctc_prefix_beam_search_lm(*args)
    run.lengths[out_axis.name] = labels.shape[1]
    return (
        E.ETensor(labels, outs[0].dims, frames, vocab, version),
        E.ETensor(score.to(torch.float32), outs[1].dims, frames, version=version),
    )
