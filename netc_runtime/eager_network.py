"""Eager mode's entry point: `@network` gives a `Network`, which runs the user's function on
one sequence of the batch at a time (`netc_runtime.eager`: the tensors, ops and loops it runs
with) and pads the results back into a batch."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import torch

from netc.ir.dims import DimTable
from netc.ir.interface import interface
from netc.ir.model import Graph, Loop
from netc.ir.search import BATCH_SIZE, SCORES, SearchPlan, search_dims, search_plan
from netc.ir.uses import values_by_id
from netc.naming import lens_name
from netc.ops.align import align_tensor
from netc_runtime.beam import Beam
from netc_runtime.eager import _UNSET, Absent, ETensor, _current, _range, _Run, stack_list
from netc_runtime.eager_loops import output_loop, unbound_after_end


class Network:
    """`@network`: call it with torch tensors as the emitted module's `forward` is called."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self._graph: Graph | None = None
        self._loops_graph: Graph | None = None
        self._params: dict[str, torch.Tensor] | None = None
        self.training = False  # like nn.Module: dropout is active only in training mode

    def train(self, mode: bool = True) -> Network:
        self.training = mode
        return self

    def eval(self) -> Network:
        return self.train(False)

    # compiled lazily: importing a model file stays cheap
    @property
    def graph(self) -> Graph:
        if self._graph is None:
            from netc.compiler import compile_graph
            from netc.passes.pipeline import PassOptions

            # the loops as written (eager_loops reads them), with the names of the parameters
            self._graph = compile_graph(
                inspect.getsourcefile(self.fn), network=self.fn.__name__, options=PassOptions(hoist=False)
            )
        return self._graph

    @property
    def loops_graph(self) -> Graph:
        """The loops as eager mode runs them (`eager_loops` looks them up here): a `choice` loop
        as the search has it (over its target's dim, with its `end` and bound), every other loop
        as training has it (the search drops the loops and outputs it does not need, which the
        model's code still runs)."""
        g = self.graph
        if g.search is None:
            return g
        if self._loops_graph is None:
            searched = {n.span.line: n for n in g.search.body if isinstance(n, Loop) and n.target is not None}
            body = [searched.pop(n.span.line, n) if isinstance(n, Loop) else n for n in g.body]
            names = {o.name for o in g.search.outputs}
            self._loops_graph = dataclasses.replace(
                g,
                body=body + list(searched.values()),
                outputs=[*g.search.outputs, *(o for o in g.outputs if o.name not in names)],
                search=None,
            )
        return self._loops_graph

    @property
    def dims(self) -> DimTable:
        return DimTable(self.graph.dims)

    @property
    def params(self) -> dict[str, torch.Tensor]:
        """Parameters by RETURNN variable name, Glorot-uniform weights and zero biases."""
        if self._params is None:
            self._params = {}
            for p in self.graph.params:
                shape = [self.dims[d].size for d in p.dims]
                t = torch.empty(*shape)
                {"glorot": torch.nn.init.xavier_uniform_, "zeros": torch.nn.init.zeros_, "ones": torch.nn.init.ones_}[
                    p.init
                ](t)
                self._params[p.name] = t
        return self._params

    @property
    def params_by_path(self) -> dict[tuple, dict[str, torch.Tensor]]:
        out: dict[tuple, dict[str, torch.Tensor]] = {}
        for p in self.graph.params:
            out.setdefault(tuple(map(tuple, p.call_path)), {})[p.role] = self.params[p.name]
        return out

    def _as_output(self, name: str, value: Any) -> ETensor:
        """A returned list is the stacked tensor; an empty one (no step stacked) has length 0."""
        if not isinstance(value, list):
            return value
        if value:
            return stack_list(value, output=name)
        # the stacked loop's dim has no frames; the others have this sequence's lengths (the
        # targets pad them so, e.g. a [batch, time] state stacked by a loop that ran no step)
        dims = self.output_dims[name]
        loop = output_loop(self.graph, name)
        known = _current.get().lengths

        def size(d: str) -> int:
            if d == "batch":
                return 1
            if self.dims[d].size is not None:
                return self.dims[d].size
            return 0 if loop is None or d == loop.axis else known.get(d, 0)

        return ETensor(torch.zeros([size(d) for d in dims]), tuple(dims))

    def load_returnn_params(self, mapping) -> None:
        for name, value in mapping.items():
            if name not in self.params:
                raise KeyError(f"unknown parameter {name!r}; known: {sorted(self.params)}")
            t = self.params[name]
            t.copy_(torch.as_tensor(value, dtype=t.dtype).reshape(t.shape))

    @property
    def output_dims(self) -> dict[str, list[str]]:
        values = values_by_id(self.graph)
        return {o.name: list(values[o.value].dims) for o in self.graph.outputs}

    def input_names(self) -> list[str]:
        api = interface(self.graph)
        return api.inputs + list(api.input_lens.values())

    def __call__(self, *args, search: bool = False, **kwargs) -> dict[str, torch.Tensor]:
        """Outputs (and losses) by name; for dims made by loops (with `end`), `<dim>_lens` too.
        `search=True` decodes with the beam: what the torch module's `search` returns."""
        out, lens = self.run(*args, search=search, **kwargs)
        plan = search_plan(self.graph) if search else None
        made = plan.made_lens if plan else interface(self.graph).made_lens
        for per_dim in lens.values():
            for d, ls in per_dim.items():
                if d in made:
                    out[made[d]] = torch.as_tensor(ls, dtype=torch.int64)
        return out

    def run(
        self, *args, search: bool = False, **kwargs
    ) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, list[int]]]]:
        """Outputs (padded, canonical dim order) and, per output, its dynamic dims' lengths."""
        g, dt = self.graph, self.dims
        plan = search_plan(g) if search else None
        if search and plan is None:
            raise ValueError(f"{g.network} has no `choice`: there is nothing to search")
        names = [*plan.inputs, *(lens_name(d) for d in plan.input_dims)] if plan else self.input_names()
        bound = dict(zip(names, args))
        bound.update(kwargs)
        missing = [n for n in names if n not in bound]
        if missing:
            raise TypeError(f"missing inputs: {', '.join(missing)}")
        per_seq: list[dict[str, ETensor]] = []
        per_seq_losses: list[dict[str, torch.Tensor]] = []
        beams: list[Beam | None] = []  # searching: each sequence's
        batch = _batch_size(g, plan, bound)
        given = {d for i in g.inputs if plan is None or i.name not in plan.targets for d in i.value.dims}
        target_dims = (
            frozenset(d for i in g.inputs if plan is not None and i.name in plan.targets for d in i.value.dims)
            - given
            - {d.name for d in g.dims if d.kind != "dynamic"}
        )
        # an oracle for forward values: eager parameters are plain tensors, nothing to differentiate
        with torch.no_grad():
            for b in range(batch):
                inputs: dict[str, Any] = {}
                lengths = {}
                for inp in g.inputs:
                    if plan is not None and inp.name in plan.targets:
                        inputs[inp.name] = Absent(inp.value.sparse_dim)
                        continue
                    x = torch.as_tensor(bound[inp.name]).narrow(inp.annotated_dims.index("batch"), b, 1)
                    for axis, d in enumerate(inp.annotated_dims):
                        if dt[d].kind == "dynamic":
                            lengths[d] = int(bound[lens_name(d)][b])
                            x = x.narrow(axis, 0, lengths[d])
                    x = align_tensor(x, inp.annotated_dims, inp.value.dims)
                    x = x.long() if inp.value.dtype == "int32" else x.float()
                    inputs[inp.name] = ETensor(x, inp.value.dims, sparse_dim=inp.value.sparse_dim)
                run = _Run(self, lengths, searching=plan is not None, seq=b, target_dims=target_dims)
                token = _current.set(run)
                try:
                    res = self._call(inputs, b)
                    if not isinstance(res, dict):
                        res = {"output": res}
                    run.check_target_covered()
                    if plan is not None:
                        res = self._decide(run, plan, res)
                        beams.append(run.beam)
                    else:
                        res = {k: self._as_output(k, v) for k, v in res.items()}
                finally:
                    _current.reset(token)
                per_seq.append(res)
                per_seq_losses.append({k: v.data.sum() for k, v in run.losses.items()})
        if plan is not None:
            _batch_steps(per_seq, beams)
            return _pad(per_seq, search_dims(g), dt)
        outs, lens = _pad(per_seq, self.output_dims, dt)
        for loss in g.losses:  # summed over the batch, as RETURNN's `as_is` and the torch module do
            outs[loss.name] = torch.stack([s[loss.name] for s in per_seq_losses]).sum()
            lens[loss.name] = {}
        return outs, lens

    def _call(self, inputs: dict[str, Any], b: int) -> Any:
        """The user's function on one sequence, with `range` the eager loop's (`eager_loops`)."""
        scope = self.fn.__globals__
        before = scope.get("range", _UNSET)
        scope["range"] = _range
        try:
            return self.fn(**inputs)
        except UnboundLocalError as e:
            raise unbound_after_end(e, b) from None
        finally:
            if before is _UNSET:
                del scope["range"]
            else:
                scope["range"] = before

    @staticmethod
    def _decide(run: _Run, plan: SearchPlan, res: dict[str, Any]) -> dict[str, ETensor]:
        """Searching: each output stacked in the choice loop, for the best hypothesis."""
        row, length, score = run.beam.best()
        axis = plan.loop.axis
        out = {}
        for name in plan.outputs:
            # by its name, as training's outputs: the graph says which loop stacks it (its items'
            # loop can mislead: one value of an earlier loop of one step, appended once)
            v = stack_list(res[name], output=name) if isinstance(res[name], list) else res[name]
            (v,), _ = run.align([v], run.beam.version)  # the hypotheses the search ended with
            data = v.data[row : row + 1].narrow(v.dims.index(axis), 0, length)
            out[name] = ETensor(data, v.dims, sparse_dim=v.sparse_dim)
        out[SCORES] = ETensor(torch.tensor([score]), ("batch",))
        return out


def _batch_steps(per_seq: list[dict[str, ETensor]], beams: list[Beam | None]) -> None:
    """A search with several choices per step and length normalization: each sequence's score as
    the batch's search gives it. Each choice scales an ended hypothesis' score by (t + 1) / t
    (RETURNN's `choice`), so one that has ended gains (T / E)^k over the steps from its
    sequence's last E to the batch's last T (k choices per step), and the score, divided by T,
    is the sequence's own per step times (T / E)^(k - 1): with one choice per step, its own."""
    steps = max((b.steps for b in beams if b is not None), default=0)
    for res, beam in zip(per_seq, beams):
        if beam is None or not beam.steps:
            continue
        # k choices with length normalization per step scale by (T / E)^k; the score was divided
        # by E here, by T in the batch, where the last choice normalises
        k = beam.normalising - beam.length_normalization
        if k:
            res[SCORES] = ETensor(res[SCORES].data * (steps / beam.steps) ** k, ("batch",))


def _batch_size(g: Graph, plan: SearchPlan | None, bound: dict[str, Any]) -> int:
    """The batch size: the first input's; a search that takes no input (its inputs are targets)
    is given `batch_size`, else it takes its target's, as the torch module's `forward` does."""
    taken = [i for i in g.inputs if plan is None or i.name in plan.inputs]
    if not taken:
        if bound.get(BATCH_SIZE) is not None:
            return int(bound[BATCH_SIZE])
        taken = [i for i in g.inputs if i.name in bound]
        if not taken:
            raise TypeError(f"search needs {BATCH_SIZE} (or {g.inputs[0].name}, whose batch size it takes)")
    first = taken[0]
    return torch.as_tensor(bound[first.name]).shape[first.annotated_dims.index("batch")]


def _pad(per_seq: list[dict[str, ETensor]], out_dims: dict[str, list[str]], dt: DimTable):
    outs, lens = {}, {}
    for name, dims in out_dims.items():
        seqs = [s[name] for s in per_seq]
        for s in seqs:
            if list(s.dims) != dims:
                raise AssertionError(f"eager output {name} has dims {s.dims}, compiler says {dims}")
        shape = [max(s.data.shape[i] for s in seqs) for i in range(len(dims))]
        shape[0] = len(seqs)
        out = torch.zeros(shape, dtype=seqs[0].data.dtype)
        for b, s in enumerate(seqs):
            out[(slice(b, b + 1),) + tuple(slice(0, n) for n in s.data.shape[1:])] = s.data
        outs[name] = out
        lens[name] = {d: [s.data.shape[i] for s in seqs] for i, d in enumerate(dims) if dt[d].kind == "dynamic"}
    return outs, lens
