"""`training()`: whether the network runs in training mode, for code that acts differently then
(zoneout, feature masking). A bool scalar decided when the network runs, not when it compiles:
one RETURNN config and one torch module serve training and recognition."""

from __future__ import annotations

from netc.ops.base import OpDef, OutType, register


@register
class Training(OpDef):
    """`training()`: True while training (RETURNN's train flag, torch's `self.training`, eager
    mode's `net.train()`), else False; a bool with no dims. `if training():` selects per name
    as any `if` on a tensor does (both branches are computed), `where(training(), a, b)` per
    element."""

    name = fn_name = "training"
    tensors = ()

    def api(self):
        pass

    def infer(self, dt, args, attrs):
        return [OutType((), "bool")]

    def returnn(self, ctx, op):
        return {"class": "train_flag"}

    def torch(self, ctx, op):
        return f"torch.tensor({ctx.training}, device={ctx.device})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        return torch.tensor(bool(ctx.training))


@register
class Searching(OpDef):
    """`searching()`: True in a beam search, else False (training, a forward pass); a bool with
    no dims. Unlike `training()` it is decided when the network compiles: a model with `choice`
    has a search network of its own (RETURNN's search network, the torch module's `search`),
    and the `search_mode` pass makes it a constant in each network, so what only one of them
    needs (a language model fused into the search) is not computed in the other. `attrs["value"]`
    is that constant (absent until the pass runs)."""

    name = fn_name = "searching"
    tensors = ()

    def api(self):
        pass

    def infer(self, dt, args, attrs):
        return [OutType((), "bool")]

    def returnn(self, ctx, op):
        return {"class": "constant", "value": bool(op.attrs["value"]), "dtype": "bool"}

    def torch(self, ctx, op):
        return f"torch.tensor({bool(op.attrs['value'])}, device={ctx.device})"

    def eager(self, ctx, args, attrs, outs):
        import torch

        return torch.tensor(bool(ctx.searching))
