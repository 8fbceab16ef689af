"""`netc preview --watch`: a local server (127.0.0.1 only) that re-renders the page when the
model file changes and tells open tabs to reload (server-sent events on `/events`).

A compile error becomes the page (with its location) instead of stopping the server. Ctrl-C
(SIGINT) or SIGTERM stops it cleanly: open event streams end, the port is closed, exit 0.
"""

from __future__ import annotations

import errno
import hashlib
import signal
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

POLL_SECONDS = 0.2  # how often the model file is looked at (no dependency on an OS file-watch API)
GONE_POLLS = 5  # the file missing this many polls in a row is deleted, not being replaced by an editor
KEEPALIVE_SECONDS = 10


class _State:
    """The current page and its version; a condition wakes the event streams on change."""

    def __init__(self):
        self.version = 0
        self.html = ""
        self.changed = threading.Condition()
        self.stopping = threading.Event()

    def publish(self, html: str) -> None:
        with self.changed:
            self.html = html
            self.version += 1
            self.changed.notify_all()

    def stop(self) -> None:
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
            pass  # one line per request on stderr would bury the compile messages

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/":
                body = state.html.encode()
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)
            elif self.path == "/events":
                self._events()
            else:
                self.send_error(HTTPStatus.NOT_FOUND)

        def _events(self) -> None:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            sent = None
            try:
                while not state.stopping.is_set():
                    with state.changed:
                        state.changed.wait_for(
                            lambda sent=sent: state.version != sent or state.stopping.is_set(),
                            timeout=KEEPALIVE_SECONDS,
                        )
                        version = state.version
                    if state.stopping.is_set():
                        break
                    # the current version at once, then each new one; the page reloads when it differs
                    self.wfile.write(f"data: {version}\n\n".encode() if version != sent else b": keep-alive\n\n")
                    self.wfile.flush()
                    sent = version
            except (BrokenPipeError, ConnectionResetError):
                pass  # the tab was closed or reloaded

    return Handler


def _fingerprint(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None  # an editor replacing the file: try again at the next poll


class PortInUse(Exception):
    """The port asked for is taken (another preview, another server)."""


def serve(
    model: Path,
    render: Callable[[str], tuple[str, str | None]],
    port: int,
    announce: Callable[[str], None],
    gone_page: Callable[[str], str],
) -> None:
    """Serve `render(version)` (a complete page, and its compile error's first line or None)
    until interrupted; re-render when `model` changes; `gone_page(version)` once it is deleted."""
    state = _State()
    seen = _fingerprint(model)
    state.publish(render("1")[0])
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(state))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} is in use; pick another with --port N (--port 0: any free port)") from None
        raise
    server.daemon_threads = True  # open event streams do not hold up the stop

    def watch() -> None:
        nonlocal seen
        missing = 0
        while not state.stopping.wait(POLL_SECONDS):
            now = _fingerprint(model)
            if now is None:
                missing += 1
                if missing == GONE_POLLS:
                    seen = None
                    state.publish(gone_page(str(state.version + 1)))
                    announce(f"{model} was deleted; the page says so until it is back")
                continue
            missing = 0
            if now != seen:
                seen = now
                page, error = render(str(state.version + 1))
                state.publish(page)
                announce(f"re-rendered {model}" if error is None else f"compile error, shown on the page: {error}")

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt

    # both stop the server the same way (set explicitly: a shell may start it with SIGINT ignored)
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    watcher = threading.Thread(target=watch, name="netc-preview-watch", daemon=True)
    watcher.start()
    host, bound = server.server_address[:2]
    announce(f"serving http://{host}:{bound}/ (watching {model}; Ctrl-C to stop)")
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        state.stop()
        server.server_close()
        watcher.join(timeout=5)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    announce("stopped")
