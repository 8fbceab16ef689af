"""Eager mode's `transducer_search`: the user's `predict` and `joint` run literally, one
hypothesis at a time (a batch of one, as every eager op), inside the search the torch module
runs (`netc.ops.transducer_search.helper_source`, the one definition of the algorithms)."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

import torch

from netc.ir.model import Value
from netc.ops import REGISTRY
from netc.ops.transducer_search import helper_source
from netc_runtime import eager as E
from netc_runtime.eager_search_calls import StepState, stacked


@cache
def _search() -> Callable:
    namespace: dict[str, Any] = {"torch": torch}
    # named as a file of this package: eager mode's call paths (which constructor call is which
    # parameter, `eager._call_path`) skip its frames, as they skip the runtime's own
    name = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transducer_search_helper.py")
    exec(compile(helper_source("search"), name, "exec"), namespace)  # noqa: S102
    return namespace["search"]


def transducer_search(
    enc, axis, predict, joint, state, label_dim, start, out_axis, blank, beam, method, max_sym
) -> tuple[E.ETensor, E.ETensor]:
    run = E._run()
    enc, step_state = stacked(enc), StepState.of(state)
    enc, version = step_state.align(run, enc)
    states = step_state.states
    label_name = label_dim.name
    attrs = {
        "axis": axis.name,
        "out_axis": out_axis.name,
        "label_dim": label_name,
        "classes": label_dim.size + 1,
        "start": start,
        "blank": blank,
        "beam": beam,
        "method": method,
        "max_sym_per_frame": max_sym,
    }
    vals = [Value(id=0, dims=a.dims, dtype=E._dtype(a.data), sparse_dim=a.sparse_dim) for a in [enc, *states]]
    outs = REGISTRY["transducer_search"].infer(run.net.dims, vals, attrs)
    rest = tuple(d for d in enc.dims if d not in ("batch", axis.name))
    data = enc.data.permute([enc.dims.index(d) for d in ("batch", axis.name, *rest)])
    frame_dims = ("batch", *rest)
    frames = run.frames()
    out_dims: list[tuple[str, ...]] = []  # the prediction output's dims, from its first call

    def output(out) -> torch.Tensor:
        out_dims[:] = [out.dims]
        return out.data

    def joint_rows(frame: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        rows = []
        for r in range(frame.shape[0]):
            scores = joint(
                E.ETensor(frame[r : r + 1], frame_dims, frames), E.ETensor(out[r : r + 1], out_dims[0], frames)
            )
            rows.append(scores.data)
        return torch.cat(rows)

    lens = torch.full((data.shape[0],), data.shape[1])
    labels, _, scores = _search()(
        data, lens, tuple(s.data for s in states),
        step_state.rows(predict, "predict", frames, label_name, output), joint_rows,
        start, blank % (label_dim.size + 1), beam, method, max_sym,
    )  # fmt: skip
    run.lengths[out_axis.name] = labels.shape[1]
    return (
        E.ETensor(labels, outs[0].dims, frames, label_name, version),
        E.ETensor(scores.to(torch.float32), outs[1].dims, frames, version=version),
    )
