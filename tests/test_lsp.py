"""`netc lsp` end to end: the real server as a subprocess over stdio, driven by a real LSP
client (pytest-lsp): diagnostics while typing, a target's refusal, hover, go to definition,
and "Show in the netc preview" opening a live preview that serves the page."""

from __future__ import annotations

import asyncio
import os
import subprocess
import urllib.request

import pytest
import pytest_lsp
from conftest import EXAMPLES, NETC
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

ELMAN = (EXAMPLES / "elman.py").read_text()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[str(NETC), "lsp"]))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        t.InitializeParams(
            capabilities=t.ClientCapabilities(
                window=t.WindowClientCapabilities(show_document=t.ShowDocumentClientCapabilities(support=True))
            )
        )
    )
    yield
    await lsp_client.shutdown_session()


async def _diagnostics(client: LanguageClient, uri: str, wanted=lambda found: True) -> list[t.Diagnostic]:
    """The document's latest published diagnostics once `wanted(them)` holds (polled, at most two
    minutes: two notifications read in one go would give one waiter the first and drop the second)."""
    for _ in range(1200):
        found = client.diagnostics.get(uri)
        if found is not None and wanted(found):
            return list(found)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no such diagnostics for {uri}; the last published: {client.diagnostics.get(uri)}")


def _open(client: LanguageClient, path, text: str) -> str:
    path.write_text(text)
    uri = path.as_uri()
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    return uri


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def _at(text: str, line: int, word: str) -> t.Position:
    """The position of `word` on 1-based `line`."""
    return t.Position(line=line - 1, character=text.splitlines()[line - 1].index(word))


@pytest.mark.asyncio(loop_scope="module")
async def test_diagnostics_follow_the_text(client: LanguageClient, tmp_path):
    broken = ELMAN.replace("h = tanh(Linear(hidden)(x_lin + h_prev))", "h = tanh(Linear(hiden)(x_lin + h_prev))")
    uri = _open(client, tmp_path / "elman.py", broken)
    (d,) = await _diagnostics(client, uri, lambda found: len(found) == 1)
    assert d.message == "unknown name `hiden`; did you mean `hidden`?" and d.source == "netc"
    assert d.severity == t.DiagnosticSeverity.Error
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (16, 24, 29)
    _change(client, uri, 2, ELMAN)  # fixed: the diagnostic goes
    assert await _diagnostics(client, uri, lambda found: not found) == []
    # a name only the RETURNN target refuses: reported once the targets are emitted
    _change(client, uri, 3, ELMAN.replace('"last": h', '"last/x": h'))
    (d,) = await _diagnostics(client, uri, lambda found: len(found) == 1)
    assert d.message.startswith("RETURNN target: output 'last/x' is not a valid RETURNN name")
    assert d.range.start.line == 18


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_and_definition(client: LanguageClient, tmp_path):
    uri = _open(client, tmp_path / "elman.py", ELMAN)
    await _diagnostics(client, uri)
    doc = t.TextDocumentIdentifier(uri=uri)
    state = await client.text_document_hover_async(t.HoverParams(text_document=doc, position=_at(ELMAN, 17, "h =")))
    text = state.contents.value
    assert text.startswith("**h**: [batch, hidden] float32"), text
    assert "loop state" in text and "RETURNN: layer `" in text and "torch: `" in text
    dim = await client.text_document_hover_async(t.HoverParams(text_document=doc, position=_at(ELMAN, 7, "hidden")))
    assert dim.contents.value == "**dim** `hidden`: static, size 32"
    where = await client.text_document_definition_async(
        t.DefinitionParams(text_document=doc, position=_at(ELMAN, 17, "hidden"))
    )
    assert where.uri == uri and (where.range.start.line, where.range.start.character) == (6, 0)


async def _hover(client: LanguageClient, uri: str, text: str, line: int, at: str, offset: int = 0) -> str | None:
    """The hover at the first occurrence of `at` on 1-based `line`, `offset` characters into it."""
    col = text.splitlines()[line - 1].index(at) + offset
    doc = t.TextDocumentIdentifier(uri=uri)
    found = await client.text_document_hover_async(
        t.HoverParams(text_document=doc, position=t.Position(line=line - 1, character=col))
    )
    return found.contents.value if found is not None else None


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_in_a_decoder_loop_shows_the_value_read_there(client: LanguageClient, tmp_path):
    """A name read in a loop before the loop assigns it is the previous step's value: the loop
    state, or the state teacher forcing shifted out of the loop (whose node is where the body
    assigns it, not the whole loop); read after its assignment, the new value."""
    text = (EXAMPLES / "attention.py").read_text()
    uri = _open(client, tmp_path / "attention.py", text)
    await _diagnostics(client, uri)
    read_before = await _hover(client, uri, text, 42, "(s)", 1)  # query = Linear(key)(s)
    assert read_before.startswith("**s**: [batch, hidden] float32\n\nloop state"), read_before
    read_after = await _hover(client, uri, text, 47, "s, context")  # logits.append(...concat(s, context))
    assert read_after.startswith("**s**: [batch, hidden] float32\n\nstacked over"), read_after
    assert "torch.tanh" in read_after
    previous = await _hover(client, uri, text, 46, "prev_emb")  # the embedding of the previous label
    assert "layer `prev_emb_2` (`shift_axis`)" in previous and "# line 48" in previous, previous
    text = (EXAMPLES / "beam_search.py").read_text()
    uri = _open(client, tmp_path / "beam_search.py", text)
    await _diagnostics(client, uri)
    for line in (42, 45):  # read as the previous label; where the body assigns it
        label = await _hover(client, uri, text, line, "label")
        assert label.startswith("**label**: [batch, dec_time] int32") and "(`shift_axis`)" in label, label
    # a word no value is named by, in the loop's body: the expression there, not the loop-wide shift
    append = await _hover(client, uri, text, 44, "append")
    assert append is None or "shift_axis" not in append, append


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_on_derived_and_tuple_dims_module_attributes_and_the_users_names(client: LanguageClient, tmp_path):
    text = (EXAMPLES / "librispeech_2018.py").read_text()
    uri = _open(client, tmp_path / "librispeech_2018.py", text)
    await _diagnostics(client, uri)
    assert await _hover(client, uri, text, 52, "enc") == "**dim** `lstm+lstm` (`enc`): static, size 64"
    assert await _hover(client, uri, text, 59, "half") == "**dim** `half`: static, size 16"
    assert await _hover(client, uri, text, 59, "pieces") == "**dim** `pieces`: static, size 2"
    text = (EXAMPLES / "conformer_ctc.py").read_text()
    uri = _open(client, tmp_path / "conformer_ctc.py", text)
    await _diagnostics(client, uri)
    lines = text.splitlines()
    assigned = 1 + lines.index("        self.kv_axis = kv_axis")
    read = 1 + lines.index("        x_kv = replace_dim(x, axis=enc_time, out_axis=self.kv_axis)")
    for line in (assigned, read):  # where it is assigned, where it is read: each instance's dim
        assert await _hover(client, uri, text, line, "kv_axis") == (
            "**self.kv_axis**: attribute of `RelPosSelfAttention`\n\n"
            "- `block1/self_att`: dim `kv_time1` (dynamic)\n- `block2/self_att`: dim `kv_time2` (dynamic)"
        )
    layer = await _hover(client, uri, text, 1 + lines.index("        self.linear_ff = Linear(4 * model)"), "linear_ff")
    assert layer.startswith("**self.linear_ff**: attribute of `FeedForward`\n\n- `block1/ffn1`: `Linear`: ")
    assert "`block1/ffn1/linear_ff/W` [model, 4*model], `block1/ffn1/linear_ff/b` [4*model]" in layer
    text = (EXAMPLES / "conformer_aed.py").read_text()
    uri = _open(client, tmp_path / "conformer_aed.py", text)
    await _diagnostics(client, uri)
    # `scores`, moved out of the decoder loop, is the value stacked as `logits`; its weight is the
    # label embedding's (tied)
    line = 1 + text.splitlines().index("        scores = output_logits(LayerNorm()(d))")
    scores = await _hover(client, uri, text, line, "scores")
    assert scores.startswith("**logits**: [batch, dec_time, vocab] float32"), scores
    assert "self.input_embedding.W" in scores, scores


@pytest.mark.asyncio(loop_scope="module")
async def test_show_in_preview_opens_the_live_page_at_the_cursor(client: LanguageClient, tmp_path):
    uri = _open(client, tmp_path / "elman.py", ELMAN)
    await _diagnostics(client, uri)
    position = _at(ELMAN, 17, "tanh")
    actions = await client.text_document_code_action_async(
        t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=uri),
            range=t.Range(start=position, end=position),
            context=t.CodeActionContext(diagnostics=[]),
        )
    )
    (command,) = actions
    assert command.title == "Show in the netc preview" and command.command == "netc.showInPreview"
    url = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command=command.command, arguments=command.arguments)
    )
    assert url.startswith("http://127.0.0.1:") and url.endswith("#at=17:13"), url
    assert [d.uri for d in client.shown_documents] == [url] and client.shown_documents[0].external
    page = await asyncio.to_thread(lambda: urllib.request.urlopen(url.split("#")[0], timeout=30).read().decode())
    assert "elman" in page and "<svg" in page


NVIM_SCRIPT = """\
local out = io.open(os.getenv("NETC_NVIM_OUT"), "w")
local client = vim.lsp.start_client({ name = "netc", cmd = { os.getenv("NETC"), "lsp" }, root_dir = vim.fn.getcwd() })
vim.lsp.buf_attach_client(0, client)
vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 100)
for _, d in ipairs(vim.diagnostic.get(0)) do
  out:write(string.format("diagnostic %d:%d %s\\n", d.lnum + 1, d.col + 1, d.message))
end
local params = { textDocument = { uri = vim.uri_from_bufnr(0) }, position = { line = 16, character = 8 } }
for _, r in pairs(vim.lsp.buf_request_sync(0, "textDocument/hover", params, 20000) or {}) do
  if r.result then out:write("hover " .. (r.result.contents.value:gsub("\\n", " ")) .. "\\n") end
end
out:close()
vim.lsp.stop_client(client)
vim.cmd("qa!")
"""


def test_in_neovim(tmp_path):
    """Once in a real editor, headless: Neovim's built-in client shows the server's diagnostic
    (a RETURNN-only refusal, reported after the targets are emitted) and its hover."""
    model = tmp_path / "elman.py"
    model.write_text(ELMAN.replace('"last": h', '"last/x": h'))
    (tmp_path / "test.lua").write_text(NVIM_SCRIPT)
    env = dict(os.environ, NETC=str(NETC), NETC_NVIM_OUT=str(tmp_path / "out.txt"))
    cmd = ["nvim", "--headless", "--clean", str(model), "-c", "luafile test.lua"]
    subprocess.run(cmd, cwd=tmp_path, env=env, timeout=180, check=True, capture_output=True)
    lines = (tmp_path / "out.txt").read_text().splitlines()
    assert lines == [
        "diagnostic 19:5 RETURNN target: output 'last/x' is not a valid RETURNN name (ASCII letters, digits and `_`, "
        "starting with a letter); rename it",
        "hover **h**: [batch, hidden] float32",
    ]
