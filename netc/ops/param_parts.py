"""RETURNN layers that read a part of one of the model's variables (one place for the getter).

A layer's `reuse_params` entry `{"custom": netc_param(...)}` makes its parameter a view of the
model's own variable: rows of a kernel over a concat (two Linears a pass split from one), and
for a `nativelstm2` unit its gate blocks in the unit's order. The variable keeps the model's
name and shape, so checkpoints fit every config of the model.
"""

from __future__ import annotations

from netc.naming import Code, py_literal

RETURNN_PARAM_HELPER = "netc_param"
RETURNN_PARAM_HELPER_SOURCE = f'''def {RETURNN_PARAM_HELPER}(name, shape, rows=None, gates=None, forget=0.0):
    """`reuse_params` `custom` getter: the model's own variable `name` of `shape` (made by the
    first layer that reads it, shared by the others), its `rows`; for a `nativelstm2` unit its
    4 gate blocks picked by `gates` (cell input, input, forget, output, as the unit has them)
    plus `forget` on the forget gate's bias (TF's LSTMCell adds 1.0). With no `name`, zeros (a
    model without a bias)."""
    import tensorflow as tf

    def custom(getter, dtype, **kwargs):
        if name is None:
            return tf.zeros(kwargs["shape"], dtype=dtype)
        for own in ("base_layer", "reuse_layer", "full_name", "name", "shape"):
            kwargs.pop(own, None)
        kwargs["reuse"] = tf.compat.v1.AUTO_REUSE  # read by several layers, or twice by one
        var = getter(name=name, shape=shape, dtype=dtype, **kwargs)
        part = var if rows is None else var[rows[0] : rows[1]]
        if gates is None or (list(gates) == [0, 1, 2, 3] and not forget):
            return part
        n = shape[-1] // 4
        blocks = [part[..., k * n : (k + 1) * n] for k in gates]
        blocks[2] = blocks[2] + forget if forget else blocks[2]
        return tf.concat(blocks, axis=-1)

    return custom
'''


def param_part(name: str | None, shape: list[int] | None = None, **part) -> dict:
    """The `reuse_params` `map` entry reading `part` (`rows`, `gates`, `forget`) of variable `name`."""
    args = [py_literal(name), py_literal(shape)]
    args += [f"{k}={py_literal(v)}" for k, v in part.items() if v is not None]
    return {"custom": Code(f"{RETURNN_PARAM_HELPER}({', '.join(args)})")}


def returnn_helpers() -> dict[str, str]:
    return {RETURNN_PARAM_HELPER: RETURNN_PARAM_HELPER_SOURCE}


def tied_params(ctx, op, layer: dict, roles: list[str]) -> dict:
    """`layer` (a `linear`) with `roles` read through `reuse_params` where one of them is another
    module's variable (`attrs["tied"]`): one TF variable, made by whichever layer RETURNN builds
    first. A W held transposed ([out, in], an embedding's [vocab, model]) is RETURNN's own
    `use_transposed_weights`."""
    if "tied" not in op.attrs:
        return layer
    layer["reuse_params"] = {"map": {r: param_part(ctx.variable(r), list(ctx.param_shape(r))) for r in roles}}
    if op.transposed("W"):
        layer["use_transposed_weights"] = True
    return layer
