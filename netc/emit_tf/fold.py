"""Peephole folds on the emitted top-level layers: the config a RETURNN user would write.

Each fold keeps the numbers and the parameter names (layers keep their absolute
`name_scope`); it only moves what one layer does into the option of the one layer that
reads it, as RETURNN configs are written by hand:

- `dropout` read by one layer that takes it as an option (`'dropout': p` on its input);
- `activation` of a `linear` layer nothing else reads (`'activation': 'sigmoid'`);
- `concat` read only by layers that concatenate a `from` list themselves and make a new
  feature dim (`linear`, recurrent cells): `'from': ['lstm0_fw', 'lstm0_bw']`; or by a
  `subnetwork` (e.g. `max_pool`'s) whose readers all make their own feature dim: RETURNN's
  concatenation then has a feature dim of its own, which nothing needs to be netc's `a+b`;
- a loss layer and a `softmax` activation output over the same logits: one softmax layer with
  RETURNN's own loss (`ce` with its label smoothing, `ctc`), named after the loss, as
  hand-written configs have it (the output's name then refers to it: see `fold`'s result);
- layers nothing reads any more (e.g. the zeros a state started from, now RETURNN's default).
"""

from __future__ import annotations

import heapq
from collections import Counter

from netc.naming import Code
from netc.ops.losses import returnn_loss

# layers that apply `dropout` to their (concatenated) input (RETURNN's _ConcatInputLayer)
_TAKE_DROPOUT = {"linear", "activation", "copy", "layer_norm", "rnn_cell"}
# layers whose output has a feature dim of their own, made from their concatenated sources
_TAKE_SOURCES = {"linear", "rnn_cell"}


def fold(layers: dict[str, dict], helpers: dict[str, str]) -> dict[str, str | None]:
    """Fold in place until nothing changes, the earliest foldable layer first. Outputs and
    losses keep their layer, except an output folded into a loss layer; functions the folded
    layers call are added to `helpers`.

    Returns where each removed layer's work went: the layer doing it now (its first reader for
    a concat, the loss layer for an output folded into it), or None for a layer nothing read.

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
        if name not in layers:
            continue
        mine = sorted(readers.get(name, {}), key=order.__getitem__)
        near = {name, *mine, *reads[name]}
        step = _fold_one(layers, name, mine, uses, readers, helpers)
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


def _fold_one(
    layers: dict[str, dict],
    name: str,
    readers: list[str],
    uses: Counter,
    readers_of: dict[str, dict[str, None]],
    helpers: dict[str, str],
) -> tuple[str, str | None] | None:
    """One fold of layer `name`: (the removed layer, the layer now doing its work), or None.
    An output or loss layer stays: only what it reads may fold into it."""
    layer = layers[name]
    cls = layer.get("class")
    if _kept(layer):
        if "loss" in layer and (output := _fold_loss(layers, name, uses, readers_of, helpers)):
            return output, name
    else:
        if not uses[name]:  # RETURNN would not build it either
            del layers[name]
            return name, None
        if cls == "dropout" and uses[name] == 1 and _fold_dropout(layers, name, readers[0]):
            return name, readers[0]
        if cls == "concat" and len(readers) == uses[name] and _fold_concat(layers, name, readers, readers_of):
            return name, readers[0]
    if cls == "activation" and isinstance(layer.get("from"), str):  # kept or not: the linear folds into it
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


def _kept(layer: dict) -> bool:
    return bool(layer.get("is_output_layer")) or "loss" in layer


def _fold_concat(
    layers: dict[str, dict], name: str, readers: list[str], readers_of: dict[str, dict[str, None]]
) -> bool:
    dim = layers[name].get("out_dim")
    if not all(layers[r].get("from") == name and _concatenates(layers, r, dim, readers_of) for r in readers):
        return False
    sources = [src for src, _dim in layers[name]["from"]]
    for r in readers:
        layers[r]["from"] = list(sources)
    del layers[name]
    return True


def _concatenates(layers: dict[str, dict], reader: str, dim, readers_of: dict[str, dict[str, None]]) -> bool:
    """Layer `reader` may take a concat's sources as its `from` list: it makes its own feature
    dim, or it is a subnetwork (its `data` is the sources concatenated, under a feature dim of
    RETURNN's) not naming the concat's dim `dim`, whose own readers all make their own."""
    layer = layers[reader]
    if _takes(layer, _TAKE_SOURCES):
        return True
    if layer.get("class") != "subnetwork" or _kept(layer) or dim is None or _contains(layer["subnetwork"], dim):
        return False
    after = readers_of.get(reader, {})
    return bool(after) and all(_takes(layers[r], _TAKE_SOURCES) and layers[r].get("from") == reader for r in after)


def _contains(v, x: str) -> bool:
    """Whether layer options `v` hold `x`: a dim variable (`Code`) or a layer reference (`str`)."""
    if isinstance(v, dict):
        return any(_contains(y, x) for y in v.values())
    if isinstance(v, (list, tuple)):
        return any(_contains(y, x) for y in v)
    return type(v) is type(x) and v == x


def _fold_loss(
    layers: dict[str, dict],
    name: str,
    uses: Counter,
    readers_of: dict[str, dict[str, None]],
    helpers: dict[str, str],
) -> str | None:
    """The loss layer `name` over logits that only it and a softmax output read becomes that
    softmax with RETURNN's own loss (the same summed value and normalisation); returns the
    output's layer, now gone."""
    loss = returnn_loss(layers[name])
    if loss is None:
        return None
    logits, target, opts, needed = loss
    top = logits.split("/")[0]  # a rec layer's sub-layer (`rec/logits`) may have other readers
    others = [r for r in readers_of.get(top, {}) if r != name and _contains(layers[r], logits)]
    if len(others) != 1 or (top == logits and uses[top] != 2):
        return None
    out = others[0]
    softmax = {"class": "activation", "activation": "softmax", "from": logits, "is_output_layer": True}
    if layers[out] != softmax or uses[out]:
        return None
    layers[name] = {**softmax, "target": target, **opts}
    del layers[out]
    helpers.update(needed)
    return out


def _fold_activation(layers: dict[str, dict], name: str, uses: Counter) -> bool:
    """The linear layer `name` reads becomes `name` with the activation as its option (and what
    else `name` has: a loss, `is_output_layer`)."""
    source = layers[name]["from"]
    linear = layers.get(source)
    if (
        linear is None
        or linear.get("class") != "linear"
        or "activation" in linear
        or uses[source] != 1
        or _kept(linear)
    ):
        return False
    layers[name] = {**linear, **{k: v for k, v in layers[name].items() if k not in ("class", "from")}}
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
                _count(x, level + (k in ("unit", "subnetwork")), uses)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _count(x, level, uses)
    elif isinstance(v, str) and not isinstance(v, Code):
        ref, up = v, 0
        while ref.startswith("base:"):
            ref, up = ref[len("base:") :], up + 1
        if up == level and not ref.startswith(("data:", "prev:")):
            uses[ref.split("/")[0]] += 1
