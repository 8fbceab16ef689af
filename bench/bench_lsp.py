"""`netc lsp`: time from a change of the text to its diagnostics, on the LibriSpeech model.

The real server over stdio (pygls's client), as an editor drives it: each change replaces the
document (alternately with a mistake in the decoder loop and without), and the time until the
server publishes the diagnostics of that version is taken. Side by side, in the same run: what
an editor without a language server would run per save, `netc compile` of the file as a
process. Medians of `--runs` changes each.

    .venv/bin/python bench/bench_lsp.py [--runs 20] [--model examples/librispeech_2018.py]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lsprotocol import types as t
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parent.parent
NETC = Path(sys.executable).parent / "netc"


async def lsp_latencies(model: Path, runs: int) -> list[float]:
    text = model.read_text()
    broken = text.replace("softmax(energy", "softmax(energyy", 1)
    assert broken != text, "the model has no `softmax(energy`: pick the mistake for this model"
    client = LanguageClient("netc-bench", "1")
    published: asyncio.Queue = asyncio.Queue()

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: t.PublishDiagnosticsParams) -> None:
        published.put_nowait((time.perf_counter(), params))

    await client.start_io(str(NETC), "lsp")
    await client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities()))
    client.initialized(t.InitializedParams())
    uri = model.resolve().as_uri()

    async def until(version: int, want_errors: bool) -> float:
        while True:
            at, params = await asyncio.wait_for(published.get(), timeout=120)
            if params.version == version and bool(params.diagnostics) == want_errors:
                return at

    item = t.TextDocumentItem(uri=uri, language_id="python", version=0, text=text)
    client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=item))
    await until(0, False)  # imports and the first compile: not what a change costs
    out = []
    for k in range(1, 2 * runs + 1):
        new = broken if k % 2 else text
        start = time.perf_counter()
        client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=k),
                content_changes=[t.TextDocumentContentChangeWholeDocument(text=new)],
            )
        )
        out.append(await until(k, new is broken) - start)
        await asyncio.sleep(1.5)  # the targets are emitted in the background after each change
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return out


def cli_latencies(model: Path, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(NETC), "compile", str(model), "-o", "/dev/null"], check=True, capture_output=True)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--model", type=Path, default=ROOT / "examples" / "librispeech_2018.py")
    args = ap.parse_args()
    lsp = asyncio.run(lsp_latencies(args.model, args.runs))
    cli = cli_latencies(args.model, max(3, args.runs // 4))
    print(f"| {args.model.name} | median ms | runs |")
    print("|---|---|---|")
    print(f"| `netc lsp`: a change to its diagnostics | {statistics.median(lsp) * 1e3:.0f} | {len(lsp)} |")
    print(
        f"| `netc compile` as a process (per save, without the server) | {statistics.median(cli) * 1e3:.0f} | {len(cli)} |"
    )


if __name__ == "__main__":
    main()
