"""RETURNN's default value of each layer option, read from RETURNN's own source (its layer
classes' `__init__` signatures, along their base classes), without importing it: an option a
config sets to its default is no difference to the layer (`"cheating": False` on a `rec` layer)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os

_NO_DEFAULT = object()


@functools.cache
def returnn_defaults() -> dict[str, dict[str, object]]:
    """layer class (`"rec"`) -> {option: its default} for every option with a literal default;
    under `"__accepted__"`, each layer class's options (with or without a default)."""
    spec = importlib.util.find_spec("returnn")
    if spec is None or not spec.submodule_search_locations:
        return {}
    layers_dir = os.path.join(next(iter(spec.submodule_search_locations)), "tf", "layers")
    files = sorted(f for f in os.listdir(layers_dir) if f.endswith(".py")) if os.path.isdir(layers_dir) else []
    stamp = [[f, os.path.getmtime(os.path.join(layers_dir, f))] for f in files]
    cache = os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "netc", "returnn_defaults.json"
    )
    try:  # parsing RETURNN's layers takes seconds: once per RETURNN installation
        with open(cache, encoding="utf-8") as f:
            cached = json.load(f)
        if cached["dir"] == layers_dir and cached["stamp"] == stamp:
            return cached["defaults"]
    except (OSError, ValueError, KeyError):
        pass
    out = _parse(layers_dir, files)
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(cache, "w", encoding="utf-8") as f:
            json.dump({"dir": layers_dir, "stamp": stamp, "defaults": out}, f)
    except (OSError, TypeError, ValueError):
        pass  # not cached: parsed again next time
    return out


def _parse(layers_dir: str, files: list[str]) -> dict[str, dict]:
    classes: dict[str, tuple] = {}  # name -> bases, own defaults, layer_class, own options
    for file in files:
        try:
            with open(os.path.join(layers_dir, file), encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError):
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = _class_info(node)
    out: dict[str, dict] = {"__accepted__": {}}
    for cls_name, (_, _, layer_class, _) in classes.items():
        if layer_class:
            merged: dict[str, object] = {}
            accepted: set[str] = set()
            for name in reversed(_mro(cls_name, classes)):
                merged.update(classes[name][1])
                accepted |= classes[name][3]
            out[layer_class] = {k: v for k, v in merged.items() if _plain(v)}  # as JSON keeps them
            out["__accepted__"][layer_class] = sorted(accepted)
    return out


def rejected_by_returnn(layer_class: str, option: str) -> bool:
    """Whether RETURNN's TensorFlow layer of `layer_class` takes no option `option` (RETURNN then
    rejects the config: an option of its Theano backend, a typo)."""
    accepted = returnn_defaults().get("__accepted__", {}).get(layer_class)
    return accepted is not None and option not in accepted


def _plain(v) -> bool:
    return v is None or isinstance(v, bool | int | float | str)


def at_default(layer_class: str, option: str, value) -> bool:
    """Whether `value` is RETURNN's default of `option` on a layer of `layer_class`."""
    default = returnn_defaults().get(layer_class, {}).get(option, _NO_DEFAULT)
    if default is _NO_DEFAULT or layer_class == "__accepted__":
        return False
    if isinstance(value, bool) or isinstance(default, bool):
        return value is default
    if isinstance(value, int | float) and isinstance(default, int | float):
        return value == default
    return type(value) is type(default) and value == default


def _class_info(node: ast.ClassDef) -> tuple:
    bases = [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases if isinstance(b, ast.Name | ast.Attribute)]
    layer_class = None
    defaults: dict[str, object] = {}
    options: set[str] = set()
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "layer_class" for t in stmt.targets
        ):
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                layer_class = stmt.value.value
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "transform_config_dict":
            # options it reads or pops from the layer's dict before the layer is made
            options |= {n.value for n in ast.walk(stmt) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            args = stmt.args
            options |= {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
            positional = args.posonlyargs + args.args
            for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults):
                _literal(defaults, arg.arg, default)
            for arg, default in zip(args.kwonlyargs, args.kw_defaults):
                if default is not None:
                    _literal(defaults, arg.arg, default)
    return bases, defaults, layer_class, options


def _literal(out: dict, key: str, node: ast.expr) -> None:
    try:
        out[key] = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass  # NotSpecified, a call: no literal default


def _mro(name: str, classes: dict, seen: frozenset = frozenset()) -> list[str]:
    """`name` and its bases (depth first), the classes RETURNN's layer modules define."""
    if name not in classes or name in seen:
        return []
    out = [name]
    for base in classes[name][0]:
        out += [b for b in _mro(base, classes, seen | {name}) if b not in out]
    return out


def unsupported_class(layer_class: object) -> str:
    """Why a layer of `layer_class` is not imported: a class netc does not import yet, or one this
    RETURNN does not have (a setup's own fork's: it gives it no meaning netc could import)."""
    known = returnn_defaults()
    if known and isinstance(layer_class, str) and layer_class not in known:
        return (
            f"RETURNN rejects it: it has no layer class {layer_class!r} (a class of another RETURNN than the "
            "installed one, as a setup's own fork's, has no meaning netc can import)"
        )
    return "this layer class is not supported by `netc import` yet"
