"""Worker processes for the fuzzer that survive what they run: a segfault, an abort, a hang.

Each worker (`fuzz_worker.py`) compiles one file per request. A worker that dies or takes
longer than the time limit is recorded as a crash for that file, killed, and replaced.
"""

from __future__ import annotations

import json
import queue
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

WORKER = Path(__file__).with_name("fuzz_worker.py")


class _Worker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        if self._read(120) is None:
            raise RuntimeError("a fuzz worker did not start")

    def _read(self, timeout: float) -> dict | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def run(self, path: str, timeout: float) -> tuple[dict, bool]:
        """The outcome for `path`, and whether this worker can take another request."""
        try:
            self.proc.stdin.write(path + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        result = self._read(timeout)
        if result is not None:
            return result, True
        alive = self.proc.poll() is None
        self.stop()
        if alive:
            return {"outcome": "crash", "detail": f"no answer within {timeout:.0f} s (killed)"}, False
        code = self.proc.returncode
        what = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return {"outcome": "crash", "detail": f"the worker died: {what}"}, False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run_all(paths: list[str], workers: int = 2, timeout: float = 30.0) -> dict[str, dict]:
    """Every path's outcome, computed by `workers` worker processes in parallel."""
    jobs: queue.Queue[str] = queue.Queue()
    for p in paths:
        jobs.put(p)
    results: dict[str, dict] = {}
    errors: list[BaseException] = []

    def serve() -> None:
        worker = None
        try:
            while True:
                try:
                    path = jobs.get_nowait()
                except queue.Empty:
                    return
                worker = worker or _Worker()
                results[path], reusable = worker.run(path, timeout)
                if not reusable:
                    worker = None
        except BaseException as e:  # noqa: BLE001  (reported by the caller)
            errors.append(e)
        finally:
            if worker is not None:
                worker.stop()

    threads = [threading.Thread(target=serve) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
