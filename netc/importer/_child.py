"""Run in a subprocess by `netc.importer.load`: load a RETURNN config as RETURNN does and print
what the importer needs as JSON on stdout.

RETURNN's own `Config` executes the file (`++name value` options set before and after, as
`python -m returnn cfg ++name value` does); datasets are never instantiated. Only data crosses
back: the `network` dict (dim tags as `{"__dim__": id}`, other objects by their `repr`), the
inputs of `extern_data`/`num_outputs` as RETURNN's `Tensor`s describe them, and every dim tag
by name, kind and size. A config that fails to load is reported at the failing line of the
config file itself. With `--no-exec`, the file is not run: the request brings the values netc
evaluated from its syntax (`netc.importer.noexec`), and only they are put into the `Config`.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def _dims():
    """A table of dim tags met so far: id -> description."""
    table: dict[int, dict] = {}
    objects: list = []  # keeps the tags alive, so ids stay unique

    def ref(dim) -> dict:
        key = id(dim)
        if key not in table:
            objects.append(dim)
            kind = "batch" if dim.is_batch_dim() else ("dynamic" if dim.dimension is None else "static")
            table[key] = {"id": len(table), "name": dim.name or "", "kind": kind, "size": dim.dimension}
        return {"__dim__": table[key]["id"]}

    return table, ref


def _plain(value, dim_ref, depth: int = 0):
    """`value` as JSON data: dicts, lists (tuples too), numbers, strings, dim tags by reference."""
    from returnn.tensor import Dim

    if depth > 50:
        return {"__object__": "<nested too deep>"}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Dim):
        return dim_ref(value)
    if isinstance(value, dict):
        return {str(k): _plain(v, dim_ref, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, dim_ref, depth + 1) for v in value]
    return {"__object__": repr(value)[:200]}


def _inputs(config, dim_ref) -> dict:
    """Each input as RETURNN makes it from `extern_data` (or `num_outputs`)."""
    from returnn.tensor import Tensor

    extern = config.typed_value("extern_data")
    if extern is None and config.has("num_outputs"):
        extern = {}
        for key, value in (config.typed_value("num_outputs") or {}).items():
            dim, ndim = value if isinstance(value, list | tuple) else (value, 2)
            extern[key] = {"dim": dim, "shape": (None, dim) if ndim == 2 else (None,), "sparse": ndim == 1}
    out = {}
    for key, opts in (extern or {}).items():
        opts = dict(opts)
        for own in ("available_for_inference",):
            opts.pop(own, None)
        t = Tensor(key, **opts)
        out[key] = {
            "dims": [dim_ref(d) for d in t.dims],
            "sparse_dim": dim_ref(t.sparse_dim) if t.sparse_dim is not None else None,
            "dtype": t.dtype,
        }
    return out


def _config_frame(exc: BaseException, path: str, offset: int) -> dict:
    """The innermost frame of the traceback in the config file itself: line, columns, message."""
    message = f"{type(exc).__name__}: {exc}"
    real = os.path.realpath(path)
    if isinstance(exc, SyntaxError) and exc.filename and os.path.realpath(exc.filename) == real:
        col = (exc.offset or 1) - 1
        return {"line": (exc.lineno or 1) + offset, "col": max(col, 0), "end_col": None, "message": message}
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.realpath(frame.filename) == real:
            where = frame
    if where is None:
        return {"line": None, "message": message}
    return {
        "line": where.lineno + offset,
        "col": where.colno if where.colno is not None else 0,
        "end_col": where.end_colno if where.end_lineno == where.lineno else None,
        "message": message,
    }


def _rebuild(data: dict) -> dict:
    """`--no-exec`'s evaluated values (netc.importer.noexec.encode) with RETURNN's own dim tags,
    made by the calls the config makes (`FeatureDim`/`SpatialDim` as returnn.tf.util.data
    defines them, without importing TensorFlow)."""
    from returnn.tensor import Dim, batch_dim

    dims: list = []

    def decode(v):
        if isinstance(v, list):
            return [decode(x) for x in v]
        if isinstance(v, dict):
            if "__tuple__" in v:
                return tuple(decode(x) for x in v["__tuple__"])
            if "__dict__" in v:
                return {decode(k): decode(x) for k, x in v["__dict__"]}
            if "__dim__" in v:
                return dims[v["__dim__"]]
            if "__dimkind__" in v:
                return getattr(Dim.Types, v["__dimkind__"])
        return v

    for r in data["dims"]:
        if r["make"] == "batch_dim":
            dims.append(batch_dim)
        elif r["make"] == "copy":
            dims.append(dims[r["of"]].copy(**{k: decode(x) for k, x in r["kwargs"].items()}))
        else:
            dims.append(Dim(*decode(r["args"]), **{k: decode(x) for k, x in r["kwargs"].items()}))
    return {k: decode(v) for k, v in data["values"].items()}


def main() -> None:
    request = json.loads(sys.stdin.read())
    path, sets = request["path"], request["set"]
    from returnn.config import Config, set_global_config

    text = open(path, encoding="utf-8").read()
    offset = text[: len(text) - len(text.lstrip())].count("\n")  # RETURNN strips the file first
    args = [a for name, value in sets for a in (f"++{name}", value)]
    config = Config()
    set_global_config(config)
    try:
        if args:
            config.parse_cmd_args(args)
        if "data" in request:  # --no-exec: the file's values, as its run would leave them
            config.typed_dict.update(_rebuild(request["data"]))
        else:
            config.load_file(path)
        if args:
            config.parse_cmd_args(args)
        table, dim_ref = _dims()
        network = config.typed_value(request["network"])
        if not isinstance(network, dict) or not all(isinstance(k, str) for k in network):
            what = "defines no" if network is None else "has no dict of layers as"
            result = {"error": {"line": None, "plain": True, "message": f"the config {what} `{request['network']}`"}}
            sys.stdout.write("\n@@netc-import@@\n" + json.dumps(result))
            return
        result = {
            "network": _plain(network, dim_ref),
            "inputs": _inputs(config, dim_ref),
            "task": config.value("task", "train"),
            "behavior_version": config.int("behavior_version", 0),  # decides some layers' defaults
            "default_target": config.value("target", "classes"),  # of a loss without `target`
        }
        result["dims"] = sorted(table.values(), key=lambda d: d["id"])
    except BaseException as e:  # noqa: BLE001 - the config's own mistakes, reported at its line
        result = {"error": _config_frame(e, path, offset)}
    sys.stdout.write("\n@@netc-import@@\n" + json.dumps(result))


if __name__ == "__main__":
    from netc import tf_quiet

    tf_quiet.quiet()
    main()
