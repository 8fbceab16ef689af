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


def _data_kwargs(config) -> dict:
    """extern_data key -> its `Tensor` kwargs, as RETURNN's `_extern_data_types_from_config`
    (returnn.tf.network, which imports TensorFlow) makes them: `extern_data` (Tensor kwargs, or
    `(dim, ndim)` pairs), else the old `num_outputs` (an int: the target's classes; a dict of ints,
    `[dim, ndim]` pairs or Tensor kwargs) and `num_inputs` (the `data` input; sparse with
    `sparse_input`)."""
    if config.has("extern_data"):
        extern = config.typed_dict.get("extern_data", config.typed_value("extern_data"))
        if hasattr(extern, "data") and not isinstance(extern, dict):  # a TensorDict
            return {k: {kk: vv for kk, vv in v.get_kwargs().items() if kk != "name"} for k, v in extern.data.items()}
        data_dims = dict(extern or {})
    else:
        data_dims = _num_outputs(config)
    out = {}
    for key, data_type in data_dims.items():
        if not isinstance(data_type, list | tuple):
            out[key] = dict(data_type) if isinstance(data_type, dict) else data_type
            continue
        dim, ndim = data_type
        if ndim == 1:
            out[key] = {"dim": dim, "shape": (None,), "sparse": True}
        else:
            out[key] = {"dim": dim, "shape": (None,) * (ndim - 1) + (dim,)}
    return out


def _num_outputs(config) -> dict:
    """`num_outputs` and `num_inputs` as `extern_data` (values: Tensor kwargs or `(dim, ndim)`)."""
    from returnn.datasets.basic import convert_data_dims

    num_inputs = config.int("num_inputs", 0)
    target = config.value("target", "classes")
    if config.is_typed("num_outputs"):
        num_outputs = config.typed_value("num_outputs")
        if not isinstance(num_outputs, dict):
            num_outputs = {target: num_outputs}
        num_outputs = convert_data_dims(dict(num_outputs), leave_dict_as_is=True)
        if "data" in num_outputs:
            v = num_outputs["data"]
            num_inputs = v[0] if isinstance(v, list | tuple) else v.get("dim", v.get("shape", [None])[-1])
    elif config.has("num_outputs"):
        num_outputs = {target: [config.int("num_outputs", 0), 1]}
    else:
        return {}
    data_dims = dict(num_outputs)
    data_dims.setdefault(
        config.value("default_input", "data"), (num_inputs, 1 if config.bool("sparse_input", False) else 2)
    )
    return data_dims


def input_kwargs(key: str, opts: dict) -> dict:
    """An input's `Tensor` kwargs as the importer reads them: `same_dim_tags_as` (RETURNN's old form
    of `dims`, whose own merging of the tags recurses) made `dims`; `vocab` left out (it names the
    labels; RETURNN reads its file, which only the config's cluster has). The `Tensor`'s version
    is kept: `dims` alone make a version-2 tensor, which has no time and feature axes (a config's
    function reading `data.time_dim_axis` then gets None)."""
    from returnn.tensor import Tensor

    opts = dict(opts)
    opts.pop("vocab", None)
    same = opts.pop("same_dim_tags_as", None)
    if not same:
        return opts
    avail = opts.pop("available_for_inference", None)
    t = Tensor(key, **opts)
    dims = list(t.dims)
    for axis, tag in same.items():
        dims[t.get_axis_from_description(axis)] = tag
    out = {"dims": dims, "sparse_dim": t.sparse_dim, "dtype": t.dtype, "version": t.version}
    if avail is not None:
        out["available_for_inference"] = avail
    return out


def _inputs(config, dim_ref) -> dict:
    """Each input as RETURNN makes it from `extern_data` (or `num_outputs`/`num_inputs`)."""
    from returnn.tensor import Tensor

    out = {}
    for key, opts in _data_kwargs(config).items():
        t = Tensor(key, **input_kwargs(key, opts))
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

    from netc.importer._as_run import AsRun, network_of

    text = open(path, encoding="utf-8").read()
    offset = text[: len(text) - len(text.lstrip())].count("\n")  # RETURNN strips the file first
    args = [a for name, value in sets for a in (f"++{name}", value)]
    config = Config()
    set_global_config(config)
    run = None
    try:
        if args:
            config.parse_cmd_args(args)
        if "data" in request:  # --no-exec: the file's values, as its run would leave them
            config.typed_dict.update(_rebuild(request["data"]))
            if args:
                config.parse_cmd_args(args)
            network, how = network_of(config, request["network"])
        else:
            with AsRun(path) as run:
                run.load(config)
                if args:
                    config.parse_cmd_args(args)
                network, how = network_of(config, request["network"])
        table, dim_ref = _dims()
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
            # the config's names bound to plain numbers/strings as its run left them (an `eval` calling
            # its functions reads them: `lm_scale = config.float("lm_scale", 0.36)`)
            "values": {
                k: v
                for k, v in config.typed_dict.items()
                if isinstance(k, str)
                and (v is None or isinstance(v, bool | int | float) or isinstance(v, str) and len(v) < 200)
            },
        }
        result["dims"] = sorted(table.values(), key=lambda d: d["id"])
        result["answered"] = run.answered if run else []
        result["absent"] = run.absent if run else []
        result["commands"] = run.commands if run else []
        result["files"] = run.files if run else []
        result["unset"] = run.unset if run else []
        result["network_note"] = how
    except BaseException as e:  # noqa: BLE001 - the config's own mistakes, reported at its line
        result = {"error": _config_frame(e, path, offset)}
    sys.stdout.write("\n@@netc-import@@\n" + json.dumps(result))


if __name__ == "__main__":
    from netc import tf_quiet

    tf_quiet.quiet()
    main()
