"""A worker of tools/import_corpus.py: reads jobs (JSON lines) on stdin, writes one result line
(`@@corpus@@ {...}`) per job on stdout. TensorFlow, once imported, serves every later job."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import traceback
from collections.abc import Callable

_MARK = "@@corpus@@ "
_PARTIAL = "@@partial@@ "  # the record so far, before a stage that may run out of time or memory


def _slug(rel: str) -> str:
    """The model's file name: the path's tail, after a hash of the whole path (configs whose long
    names differ only at the front would share the tail: one worker's model written over another's)."""
    return hashlib.sha1(rel.encode()).hexdigest()[:8] + "_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", rel)[-140:]


def cause_of(message: str) -> str:
    """A refusal's or a load error's cause without the names of the config's layers and values."""
    first = message.splitlines()[0]
    first = re.sub(r"^.*?:\d+:\d+: error: ", "", first)
    first = re.sub(r"^[^ ]*: error: ", "", first)
    m = re.match(r"layer `[^`]*` \(([\w]+)\): (.*)", first)
    if m:
        cls, why = m.groups()
        why = re.sub(r"'[^']*'", "'…'", why)
        why = re.sub(r"\b\d+\b", "N", why)
        return f"({cls}) {why}"[:120]
    first = re.sub(r"'[^']*'", "'…'", first)
    first = re.sub(r'"[^"]*"', '"…"', first)
    first = re.sub(r"\b\d+\b", "N", first)
    return first[:120]


def do_import(job: dict, rec: dict) -> str | None:
    """Import the config (run, else `--no-exec`); the model's file, or None."""
    from corpus_layers import scan, usage

    from netc.errors import CompileError
    from netc.importer import import_loaded
    from netc.importer.load import load_config

    try:
        loaded = load_config(job["path"])  # run, else --no-exec, as `netc import` does
    except CompileError as e:
        rec["layers"], rec["layers_scanned"] = scan(job["path"]), True
        rec["outcome"] = "refused"
        rec["error"] = e.render() if e.span else str(e)
        rec["cause"] = "load: " + cause_of(rec["error"])
        if (broken := _broken(e.message)) is not None:  # it fails on any machine: not a valid config
            rec["outcome"] = "invalid"
            rec["invalid"] = broken
        return None
    rec["load"] = "no-exec" if loaded.no_exec else "exec"
    rec["layers"] = usage(loaded.network)
    try:
        result = import_loaded(loaded)
    except CompileError as e:
        rec["outcome"] = "refused"
        rec["error"] = e.render() if e.span else str(e)
        rec["cause"] = cause_of(rec["error"])
        return None
    models = os.path.join(job["out"], "models")
    os.makedirs(models, exist_ok=True)
    model = os.path.join(models, _slug(job["config"]) + ".py")
    with open(model, "w", encoding="utf-8") as f:
        f.write(result.source)
    rec["model"] = model
    if result.errors:
        rec["outcome"] = "refused"
        rec["errors"] = [e.render() for e in result.errors]
        rec["cause"] = cause_of(rec["errors"][0])
        if "RETURNN rejects" in result.errors[0].message:  # the claim checked: RETURNN builds the original
            from corpus_match import returnn_error

            rec["returnn_error"] = returnn_error(job["path"], loaded.no_exec)
            if rec["returnn_error"] is not None:
                rec["outcome"] = "invalid"
                rec["invalid"] = f"RETURNN rejects it: {rec['returnn_error']}"
        return None
    rec["outcome"] = "imported"
    rec["warnings"] = len(result.warnings)
    rec["notes"] = result.notes
    rec["names"] = {"params": result.params, "outputs": result.outputs, "losses": result.losses}
    return model


# errors of the config's own Python, whichever machine runs it (not its cluster's files or modules);
# a NameError may be a name the config expects from its command line (`++name value`): not here
_BROKEN = ("SyntaxError", "IndentationError", "TabError", "UnboundLocalError")


def _broken(message: str) -> str | None:
    """Why a config that fails to load fails on any machine (its own Python), or None."""
    m = re.match(r"the config fails to load: (\w+): (.*)", message)
    if m is None:
        return None
    kind, why = m.groups()
    if kind in _BROKEN or (kind == "TypeError" and "got an unexpected keyword argument" in why):
        return f"its Python fails wherever it runs: {kind}: {why.split(' (and --no-exec')[0]}"
    return None


def do_verify(model: str) -> dict:
    """`netc verify` (training; `--search` too where the model decodes), in this process."""
    from netc.compiler import compile_graph
    from netc.errors import CompileError
    from netc.ir.search import search_plan
    from netc_runtime.failures import error_line
    from netc_runtime.verify import verify

    try:
        g = compile_graph(model)
    except CompileError as e:
        return {"status": "compile", "cause": "compile: " + cause_of(str(e))}
    out = {"status": "ok"}
    try:
        searches = search_plan(g) is not None
    except CompileError as e:  # a model netc can train but not search (two loops with `choice`)
        return {"status": "compile", "cause": "search: " + cause_of(str(e))}
    for search in (False, True) if searches else (False,):
        what = "search" if search else "train"
        try:
            comps, _ = verify(model, g, search=search)
        except Exception as e:  # noqa: BLE001 - reported per config
            return {"status": "fail", "cause": f"{what}: " + cause_of(error_line(e))}
        bad = [c for c in comps if not c.ok]
        if bad:
            worst = max(bad, key=lambda c: c.max_abs_diff)
            return {"status": "mismatch", "cause": f"{what}: {worst.output} vs {worst.backend}"}
        out[what] = "ok"
    return out


_LAYER_CLASSES: dict | None = None


def forget_config_layer_classes() -> None:
    """A config may register layer classes of its own (`register_layer_class`); RETURNN refuses
    another class under a name already taken, so each config starts from RETURNN's own classes,
    as in a process of its own."""
    global _LAYER_CLASSES
    import returnn.tf.layers.basic as basic

    if _LAYER_CLASSES is None:  # before the first config: RETURNN's classes only
        if not basic._LayerClassDictInitialized:
            basic._init_layer_class_dict()
        _LAYER_CLASSES = dict(basic._LayerClassDict)
    basic._LayerClassDict.clear()
    basic._LayerClassDict.update(_LAYER_CLASSES)


def run_job(job: dict, partial: Callable[[dict], None] = lambda rec: None) -> dict:
    forget_config_layer_classes()
    rec = {"config": job["config"], "folder": job["config"].split("/")[0]}
    try:
        model = do_import(job, rec)
    except Exception as e:  # noqa: BLE001 - a traceback of netc import: the bug this runner looks for
        rec["outcome"] = "error"
        rec["cause"] = f"traceback: {type(e).__name__}: {str(e)[:100]}"
        rec["traceback"] = traceback.format_exc()[-4000:]
        return rec
    if model is None:
        return rec
    if "verify" in job["stages"]:
        partial(dict(rec, stage="verify"))
        rec["verify"] = do_verify(model)
    if "match" in job["stages"] and rec.get("verify", {"status": "ok"})["status"] == "ok":
        from corpus_match import match

        from netc_runtime.failures import error_line

        partial(dict(rec, stage="match"))
        try:
            rec["match"] = match(job["path"], rec["load"] == "no-exec", model, rec["names"])
        except Exception as e:  # noqa: BLE001 - reported per config
            rec["match"] = {"status": "fail", "cause": cause_of(error_line(e))}
            rec["match_traceback"] = traceback.format_exc()[-3000:]
    rec.pop("names", None)
    return rec


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # RETURNN's and TensorFlow's prints go to the log, results to the real stdout
    sys.stdout = sys.stderr
    for line in sys.stdin:
        job = json.loads(line)
        print(f"== {job['config']}", file=sys.stderr, flush=True)

        def partial(rec: dict) -> None:
            rec.pop("names", None)
            real_stdout.write(_PARTIAL + json.dumps(rec) + "\n")
            real_stdout.flush()

        rec = run_job(job, partial)
        real_stdout.write(_MARK + json.dumps(rec) + "\n")
        real_stdout.flush()


if __name__ == "__main__":
    main()
