"""`netc lsp`: a language server over stdio (pygls).

- Diagnostics as the user types: the located errors `netc compile` gives, with ranges. Each
  change compiles the text (parser and passes) and publishes at once; the targets are emitted
  next, in the background, and a target's refusal is published as one more diagnostic.
- Hover: a dim's kind and size; a value's dims and dtype, whether it is loop state, stacked,
  read after the loop or hoisted, its RETURNN layer and its torch line.
- Go to definition: dims, modules, helpers, `self.<attr>`, locals.
- The code action "Show in the netc preview" (command `netc.showInPreview`): starts (or
  reuses) `netc preview --watch` for the file and asks the client to open the page at the
  cursor (`#at=line:col`).

Compiles run one at a time on a worker thread; a result for an outdated version of the text is
dropped. Positions: the client's UTF-16 columns are converted to characters and back.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from netc.errors import Span
from netc.lsp.analysis import Analysis, add_previews, analyse, definition, hover

SHOW_IN_PREVIEW = "netc.showInPreview"


def _utf16(line_text: str, col: int) -> int:
    return len(line_text[:col].encode("utf-16-le")) // 2


def _chars(line_text: str, units: int) -> int:
    return len(line_text.encode("utf-16-le")[: units * 2].decode("utf-16-le", errors="ignore"))


class NetcLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("netc", version("netc"), text_document_sync_kind=t.TextDocumentSyncKind.Full)
        self.compiler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="netc-compile")
        self.analyses: dict[str, Analysis] = {}
        self.pending: dict[str, asyncio.Task] = {}
        self.previews: dict[str, tuple[subprocess.Popen, str]] = {}  # file -> its --watch server, URL

    # --- positions ---------------------------------------------------------------------

    @staticmethod
    def position(text: str, pos: t.Position) -> tuple[int, int]:
        lines = text.splitlines()
        line_text = lines[pos.line] if pos.line < len(lines) else ""
        return pos.line + 1, _chars(line_text, pos.character)

    @staticmethod
    def range(text: str, span: Span) -> t.Range:
        lines = text.splitlines()

        def pos(line: int, col: int) -> t.Position:
            line_text = lines[line - 1] if 0 < line <= len(lines) else ""
            return t.Position(line=max(line - 1, 0), character=_utf16(line_text, col))

        return t.Range(start=pos(span.line, span.col), end=pos(span.end_line, max(span.end_col, span.col + 1)))

    # --- analysis ----------------------------------------------------------------------

    def diagnostics(self, a: Analysis) -> list[t.Diagnostic]:
        out = []
        for e in a.errors:
            if e.span is not None and e.span.file == a.path:
                where = self.range(a.text, e.span)
            else:  # about the file as a whole, or another file: shown on the first line
                where = t.Range(start=t.Position(line=0, character=0), end=t.Position(line=0, character=0))
            out.append(t.Diagnostic(range=where, message=e.message, severity=t.DiagnosticSeverity.Error, source="netc"))
        return out

    def publish(self, uri: str, a: Analysis, doc_version: int | None) -> None:
        params = t.PublishDiagnosticsParams(uri=uri, diagnostics=self.diagnostics(a), version=doc_version)
        self.text_document_publish_diagnostics(params)

    def refresh(self, uri: str) -> None:
        """Compile the document's current text (after any earlier compile of it)."""
        doc = self.workspace.get_text_document(uri)
        self.pending[uri] = asyncio.ensure_future(self._refresh(uri, doc.version, doc.source))

    def current(self, uri: str, doc_version: int | None) -> bool:
        return self.workspace.get_text_document(uri).version == doc_version

    async def _refresh(self, uri: str, doc_version: int | None, text: str) -> Analysis | None:
        loop = asyncio.get_running_loop()
        path = to_fs_path(uri) or uri
        a = await loop.run_in_executor(self.compiler, analyse, path, text)
        if not self.current(uri, doc_version):
            return None
        self.analyses[uri] = a
        self.publish(uri, a, doc_version)
        before = len(a.errors)
        await loop.run_in_executor(self.compiler, add_previews, a)
        if len(a.errors) != before and self.current(uri, doc_version):
            self.publish(uri, a, doc_version)  # a target refused the model
        return a

    async def analysis(self, uri: str) -> Analysis | None:
        """The latest analysis of the document, waiting for one under way."""
        task = self.pending.get(uri)
        if task is not None and not task.done():
            await asyncio.shield(task)
        return self.analyses.get(uri)

    # --- the preview -------------------------------------------------------------------

    def preview_url(self, path: str) -> str:
        """The URL of a `netc preview --watch` for `path`, started on first use."""
        running = self.previews.get(path)
        if running is not None and running[0].poll() is None:
            return running[1]
        cmd = [sys.executable, "-m", "netc.cli", "preview", path, "--watch", "--port", "0"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        first = proc.stdout.readline()  # "netc preview: serving http://127.0.0.1:PORT/ (watching ...)"
        if "serving http://" not in first:
            proc.kill()
            raise RuntimeError(f"netc preview did not start: {first.strip() or 'no output'}")
        url = first.split("serving ", 1)[1].split()[0]
        self.previews[path] = (proc, url)
        return url

    def stop_previews(self) -> None:
        for proc, _ in self.previews.values():
            proc.terminate()
        for proc, _ in self.previews.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.previews.clear()


server = NetcLanguageServer()


@server.feature(t.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: NetcLanguageServer, params: t.DidOpenTextDocumentParams) -> None:
    ls.refresh(params.text_document.uri)


@server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: NetcLanguageServer, params: t.DidChangeTextDocumentParams) -> None:
    ls.refresh(params.text_document.uri)


@server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: NetcLanguageServer, params: t.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.analyses.pop(uri, None)
    ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(t.TEXT_DOCUMENT_HOVER)
async def on_hover(ls: NetcLanguageServer, params: t.HoverParams) -> t.Hover | None:
    a = await ls.analysis(params.text_document.uri)
    if a is None:
        return None
    line, col = ls.position(a.text, params.position)
    text = hover(a, line, col)
    if text is None:
        return None
    return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=text))


@server.feature(t.TEXT_DOCUMENT_DEFINITION)
async def on_definition(ls: NetcLanguageServer, params: t.DefinitionParams) -> t.Location | None:
    a = await ls.analysis(params.text_document.uri)
    if a is None:
        return None
    span = definition(a, *ls.position(a.text, params.position))
    return None if span is None else t.Location(uri=params.text_document.uri, range=ls.range(a.text, span))


@server.feature(t.TEXT_DOCUMENT_CODE_ACTION)
def on_code_action(ls: NetcLanguageServer, params: t.CodeActionParams) -> list[t.Command]:
    """One action everywhere in a model: the live preview at the cursor (a plain Command, which
    every client runs with workspace/executeCommand)."""
    pos = params.range.start
    return [
        t.Command(
            title="Show in the netc preview",
            command=SHOW_IN_PREVIEW,
            arguments=[params.text_document.uri, pos.line, pos.character],
        )
    ]


@server.command(SHOW_IN_PREVIEW)
async def show_in_preview(ls: NetcLanguageServer, uri: str, line: int, character: int) -> str:
    """Open the live preview at a position; returns the URL (also shown to the client)."""
    doc = ls.workspace.get_text_document(uri)
    path = to_fs_path(uri) or uri
    at_line, at_col = ls.position(doc.source, t.Position(line=line, character=character))
    base = await asyncio.get_running_loop().run_in_executor(None, ls.preview_url, path)
    url = f"{base}#at={at_line}:{at_col + 1}"
    try:
        await ls.window_show_document_async(t.ShowDocumentParams(uri=url, external=True))
    except Exception:  # a client without window/showDocument: the URL is the command's result
        ls.window_show_message(t.ShowMessageParams(type=t.MessageType.Info, message=f"netc preview: {url}"))
    return url


@server.feature(t.SHUTDOWN)
def on_shutdown(ls: NetcLanguageServer, params: None) -> None:
    ls.stop_previews()


def main() -> None:
    try:
        server.start_io()
    finally:
        server.stop_previews()
