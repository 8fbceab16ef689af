"""The fuzzer's worker process: compiles model files through the real pipeline, one per request.

Run as `python fuzz_worker.py`; each line on stdin is a path, each line on stdout the JSON
outcome for it. Memory is capped with `setrlimit` and the compile runs some frames deep, as
it would under a test runner; a crash that kills the process (a segfault, an abort) is
detected by the parent (`fuzz_pool.py`), which restarts the worker.

Outcomes: "ok" (every target compiled and each emitted file parses), "error" (a CompileError
that renders as `file:line:col: error: ...` or `file: error: ...`), "crash" (anything else).
"""

from __future__ import annotations

import json
import re
import resource
import sys
import time
import traceback

MEMORY_LIMIT = 1 << 30  # bytes of address space; compiling any example peaks below 100 MB
STACK_HEADROOM = 120  # frames below the compile, as pytest or another caller would add


def check(path: str) -> dict:
    from netc.compiler import TARGETS, compile_graph
    from netc.errors import CompileError

    try:
        g = compile_graph(path)
    except CompileError as e:
        return _error(path, e)
    outcome = {"outcome": "ok", "detail": ""}
    for target, emit in TARGETS.items():
        try:
            text = emit(g)
        except CompileError as e:
            if outcome["outcome"] == "ok":  # the first target's error; the others still must not crash
                outcome = _error(path, e)
            continue
        try:
            compile(text, f"<{target} of {path}>", "exec")
        except SyntaxError as e:
            return {"outcome": "crash", "detail": f"the emitted {target} file does not parse: {e}"}
    return outcome


def _error(path: str, e) -> dict:
    text = e.render()
    head = text.splitlines()[0] if text else ""
    m = re.match(rf"{re.escape(path)}:(\d+):(\d+): error: .", head)
    located = (m is not None and int(m[1]) >= 1 and int(m[2]) >= 1) or head.startswith(f"{path}: error: ")
    if not located:
        return {"outcome": "crash", "detail": f"an error without a place: {head!r}"}
    return {"outcome": "error", "detail": head[len(path) :]}


def _deep(n: int, path: str) -> dict:
    return check(path) if n == 0 else _deep(n - 1, path)


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    import netc.compiler  # noqa: F401  (imported once, before the first timed request)

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        path = line.rstrip("\n")
        start = time.monotonic()
        try:
            result = _deep(STACK_HEADROOM, path)
        except BaseException as e:  # noqa: BLE001  (anything but a CompileError is a crash)
            tb = traceback.format_exception(type(e), e, e.__traceback__)
            result = {"outcome": "crash", "detail": f"{type(e).__name__}: {e}"[:300] + "\n" + "".join(tb[-4:])[-1500:]}
        result["seconds"] = round(time.monotonic() - start, 3)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
