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

import heapq
from collections import Counter

from netc.naming import Code

# layers that apply `dropout` to their (concatenated) input (RETURNN's _ConcatInputLayer)
_TAKE_DROPOUT = {"linear", "activation", "copy", "layer_norm", "rnn_cell"}
# layers whose output has a feature dim of their own, made from their concatenated sources
_TAKE_SOURCES = {"linear", "rnn_cell"}


def fold(layers: dict[str, dict]) -> dict[str, str | None]:
    """Fold in place until nothing changes, the earliest foldable layer first. Outputs and
    losses stay as they are.

    Returns where each removed layer's work went: the layer doing it now (its first reader for
    a concat), or None for a layer nothing read.

    Who reads what is indexed once and kept current around each fold; a fold can only enable
    folds next to it (its layers' readers and sources, and theirs), which are looked at again,
    so the work is linear in the layers rather than a rescan of all of them per fold."""
    order = {name: i for i, name in enumerate(layers)}
    reads: dict[str, Counter] = {}
    uses: Counter = Counter()
    readers: dict[str, dict[str, None]] = {}  # layer -> the layers reading it (as a set)

    def reindex(name: str) -> None:
        for src, k in reads.pop(name, Counter()).items():
            uses[src] -= k
            readers[src].pop(name, None)
        if name in layers:
            reads[name] = _reads_of(layers[name])
            for src, k in reads[name].items():
                uses[src] += k
                readers.setdefault(src, {})[name] = None

    for name in layers:
        reindex(name)
    pending = [(i, name) for name, i in order.items()]  # already a heap: in order
    queued = set(layers)
    moved: dict[str, str | None] = {}
    while pending:
        _, name = heapq.heappop(pending)
        queued.discard(name)
        layer = layers.get(name)
        if layer is None or layer.get("is_output_layer") or "loss" in layer:
            continue
        mine = sorted(readers.get(name, {}), key=order.__getitem__)
        near = {name, *mine, *reads[name]}
        step = _fold_one(layers, name, mine, uses)
        if step is None:
            continue
        gone, into = step
        moved[gone] = into
        near |= {gone, *reads.get(gone, ())}
        for n in near:
            reindex(n)
        # looked at again: these layers, their sources, the readers of those that changed, and
        # the one reader of a layer now read once (not all readers of a layer many read)
        changed = {name, gone, *mine} | ({into} if into else set())
        again = set(near)
        for n in near:
            again |= set(reads.get(n, ()))
            if n in changed or uses[n] == 1:
                again |= set(readers.get(n, {}))
        for n in again:
            if n in layers and n not in queued:
                queued.add(n)
                heapq.heappush(pending, (order[n], n))
    # follow chains (a dropout folded into a concat folded into a linear)
    for gone, into in moved.items():
        while into in moved:
            into = moved[into]
        moved[gone] = into
    return moved


def _fold_one(layers: dict[str, dict], name: str, readers: list[str], uses: Counter) -> tuple[str, str | None] | None:
    """One fold of layer `name`: (the removed layer, the layer now doing its work), or None."""
    layer = layers[name]
    if not uses[name]:  # RETURNN would not build it either
        del layers[name]
        return name, None
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


def _reads_of(layer: dict) -> Counter:
    """How often the layer reads each top-level layer."""
    uses: Counter = Counter()
    _count(layer, 0, uses)
    return uses


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
