"""Eager mode's `ctc_prefix_search` with an LM function: the user's `lm` runs literally, one
prefix at a time (a batch of one, as every eager op), inside the search the torch module runs
(`netc.ops.ctc_search.ctc_prefix_beam_search_lm`, the one definition of the algorithm)."""

from __future__ import annotations

from typing import Any

import torch

from netc.ir.model import Value
from netc.ops import REGISTRY
from netc.ops.ctc_decode import flashlight_options
from netc.ops.ctc_search import ctc_flashlight_search_lm, ctc_prefix_beam_search_lm
from netc_runtime import eager as E


def ctc_prefix_search_lm(
    logits, axis, beam, out_axis, lm, lm_weight, lm_state, bos, options: dict
) -> tuple[E.ETensor, E.ETensor]:
    run = E._run()
    logits = E.stack_list(logits) if isinstance(logits, list) else logits
    state_is_tuple = isinstance(lm_state, (tuple, list))
    states = [E.stack_list(s) if isinstance(s, list) else s for s in (lm_state if state_is_tuple else [lm_state])]
    if any(isinstance(a, E.Absent) for a in [logits, *states]):  # searching: computed from a target
        return E.ABSENT, E.ABSENT
    # after a beam search: rows of its hypotheses (`lm_state` made anew has one row, the batch's)
    (logits, *states), version = run.align([logits, *states])
    attrs = {"axis": axis.name, "beam": beam, "out_axis": out_axis.name, "lm_weight": lm_weight, "bos": bos, **options}
    vals = [Value(id=0, dims=a.dims, dtype=E._dtype(a.data), sparse_dim=a.sparse_dim) for a in [logits, *states]]
    outs = REGISTRY["ctc_prefix_search"].infer(run.net.dims, vals, attrs)
    vocab = outs[0].sparse_dim
    time = next(d for d in logits.dims if d not in ("batch", axis.name))
    data = logits.data.permute([logits.dims.index(d) for d in ("batch", time, axis.name)])
    frames = run.frames()

    def lm_rows(labels: torch.Tensor, *st: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rows = []
        for r in range(labels.shape[0]):
            label = E.ETensor(labels[r : r + 1], ("batch",), frames, vocab)
            row = [E.ETensor(s[r : r + 1], old.dims, frames, old.sparse_dim) for s, old in zip(st, states)]
            out, new = lm(label, tuple(row) if state_is_tuple else row[0])
            new = list(new) if state_is_tuple else [new]
            if not isinstance(out, E.ETensor) or set(out.dims) != {"batch", vocab}:
                raise TypeError(f"`lm` must return log probabilities [batch, {vocab}] and the state")
            logp = out.data.permute([out.dims.index(d) for d in ("batch", vocab)])
            rows.append([logp, *(_as(n, s).data for n, s in zip(new, states))])
        return tuple(torch.cat(parts) for parts in zip(*rows))

    args = (
        data,
        torch.full((data.shape[0],), data.shape[1]),
        beam,
        lm_rows,
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


def _as(new: Any, old: E.ETensor) -> E.ETensor:
    if not isinstance(new, E.ETensor) or new.dims != old.dims:
        raise TypeError(f"`lm` must return a state with the dims of the one given, [{', '.join(old.dims)}]")
    return new
