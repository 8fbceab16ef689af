"""Peephole folds on the emitted top-level layers: the config a RETURNN user would write.

Each fold keeps the numbers and the parameter names (layers keep their absolute
`name_scope`); it only moves what one layer does into the option of the one layer that
reads it, as RETURNN configs are written by hand:

- `dropout` read by one layer that takes it as an option (`'dropout': p` on its input);
- `activation` of a `linear` layer nothing else reads (`'activation': 'sigmoid'`);
- `concat` read only by layers that concatenate a `from` list themselves and make a new
  feature dim (`linear`, recurrent cells): `'from': ['lstm0_fw', 'lstm0_bw']`;
- layers nothing reads any more (e.g. the zeros a state started from, now RETURNN's default).
"""

from __future__ import annotations

from collections import Counter

from netc.naming import Code

# layers that apply `dropout` to their (concatenated) input (RETURNN's _ConcatInputLayer)
_TAKE_DROPOUT = {"linear", "activation", "copy", "layer_norm", "rnn_cell"}
# layers whose output has a feature dim of their own, made from their concatenated sources
_TAKE_SOURCES = {"linear", "rnn_cell"}


def fold(layers: dict[str, dict]) -> dict[str, str | None]:
    """Fold in place until nothing changes. Outputs and losses stay as they are.

    Returns where each removed layer's work went: the layer doing it now (its first reader for
    a concat), or None for a layer nothing read."""
    moved: dict[str, str | None] = {}
    while step := _fold_once(layers):
        gone, into = step
        moved[gone] = into
    # follow chains (a dropout folded into a concat folded into a linear)
    for gone, into in moved.items():
        while into in moved:
            into = moved[into]
        moved[gone] = into
    return moved


def _fold_once(layers: dict[str, dict]) -> tuple[str, str | None] | None:
    """One fold: (the removed layer, the layer now doing its work), or None when none applies."""
    uses = _uses(layers)
    for name, layer in list(layers.items()):
        if layer.get("is_output_layer") or "loss" in layer:
            continue
        if not uses[name]:  # RETURNN would not build it either
            del layers[name]
            return name, None
        readers = [r for r, lay in layers.items() if _reads(lay, name)]
        cls = layer.get("class")
        if cls == "dropout" and uses[name] == 1 and _fold_dropout(layers, name, readers[0]):
            return name, readers[0]
        if cls == "concat" and len(readers) == uses[name] and _fold_concat(layers, name, readers):
            return name, readers[0]
        if cls == "activation" and isinstance(layer.get("from"), str):
            source = layer["from"]
            if _fold_activation(layers, name, uses):
                return source, name
    return None


def _fold_dropout(layers: dict[str, dict], name: str, reader: str) -> bool:
    layer, target = layers[name], layers[reader]
    if not _takes(target, _TAKE_DROPOUT) or "dropout" in target or target.get("from") != name:
        return False
    target["from"] = layer["from"]
    target["dropout"] = layer["dropout"]
    target["dropout_noise_shape"] = layer["dropout_noise_shape"]
    del layers[name]
    return True


def _fold_concat(layers: dict[str, dict], name: str, readers: list[str]) -> bool:
    if not all(_takes(layers[r], _TAKE_SOURCES) and layers[r].get("from") == name for r in readers):
        return False
    sources = [src for src, _dim in layers[name]["from"]]
    for r in readers:
        layers[r]["from"] = list(sources)
    del layers[name]
    return True


def _fold_activation(layers: dict[str, dict], name: str, uses: Counter) -> bool:
    """The linear layer `name` reads becomes `name` with the activation as its option."""
    source = layers[name]["from"]
    linear = layers.get(source)
    if linear is None or linear.get("class") != "linear" or "activation" in linear or uses[source] != 1:
        return False
    layers[name] = {**linear, "activation": layers[name]["activation"]}
    del layers[source]
    return True


def _takes(layer: dict, classes: set[str]) -> bool:
    """A layer of these classes (a `rec` layer counts when its unit is a cell, e.g. nativelstm2)."""
    cls = layer.get("class")
    return cls in classes or (cls == "rec" and isinstance(layer.get("unit"), str))


def _uses(layers: dict[str, dict]) -> Counter:
    uses: Counter = Counter()
    for layer in layers.values():
        _count(layer, 0, uses)
    return uses


def _reads(layer: dict, name: str) -> bool:
    uses: Counter = Counter()
    _count(layer, 0, uses)
    return uses[name] > 0


def _count(v, level: int, uses: Counter) -> None:
    """Top-level layer names read in `v` (a layer at `level` units down: `base:` reaches out)."""
    if isinstance(v, dict):
        for k, x in v.items():
            if k not in ("target", "class", "sub_layer_name"):  # a data key, a kind, a unit's layer
                _count(x, level + (k == "unit"), uses)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _count(x, level, uses)
    elif isinstance(v, str) and not isinstance(v, Code):
        ref, up = v, 0
        while ref.startswith("base:"):
            ref, up = ref[len("base:") :], up + 1
        if up == level and not ref.startswith(("data:", "prev:")):
            uses[ref.split("/")[0]] += 1
