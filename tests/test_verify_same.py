"""`netc verify --same-as`, through the real CLI: the streaming Conformer's chunk-by-chunk network
equals its whole-sequence chunk-masked form on eager, torch and RETURNN, and a chunked form whose
cache is one chunk too short is rejected with a line saying what differs."""

from __future__ import annotations

import re

from conftest import EXAMPLES, run_netc

EXAMPLE = EXAMPLES / "conformer_streaming.py"
# seed 2, 5 sequences of at most 25 input frames: encoder lengths 13, 11, 4, 4, 2 (chunks of 4):
# more chunks than the window holds, short last chunks, an exact chunk, one shorter than a chunk
ARGS = ("--network", "conformer_streaming", "--same-as", "conformer_streaming_chunked")
BATCH = ("--seed", "2", "--batch", "5", "--max-len", "25")


def test_chunk_by_chunk_equals_whole_sequence():
    proc = run_netc("verify", EXAMPLE, *ARGS, *BATCH)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "time=[25, 21, 8, 7, 3]" in proc.stdout, proc.stdout
    rows = re.findall(r"(\w+)\s+on (\w+)\s+max\|Δ\| = (\S+)\s+\((\d+) valid", proc.stdout)
    assert {(o, b) for o, b, _, _ in rows} == {
        (o, b) for o in ("output", "encoder", "ctc") for b in ("eager", "torch", "returnn")
    }
    for output, backend, diff, valid in rows:
        assert int(valid) > 0
        assert float(diff) <= 1e-5 * (200 if output == "ctc" else 1), (output, backend, diff)
    assert "conformer_streaming_chunked = conformer_streaming on eager, torch, returnn" in proc.stdout
    assert proc.stdout.rstrip().endswith("verify: ok")


def test_a_cache_one_chunk_too_short_is_rejected(tmp_path):
    src = EXAMPLE.read_text()
    wrong = {  # the cache holds LEFT_CHUNKS - 1 chunks: the first frames of each chunk see less
        'cache_time = Dim("cache_time", LEFT_CHUNKS * CHUNK_SIZE)': 'cache_time = Dim("cache_time", (LEFT_CHUNKS - 1) * CHUNK_SIZE)',
        "WINDOW = (LEFT_CHUNKS + 1) * CHUNK_SIZE": "WINDOW = LEFT_CHUNKS * CHUNK_SIZE",
        "rel = (j - LEFT_CHUNKS * CHUNK_SIZE)": "rel = (j - (LEFT_CHUNKS - 1) * CHUNK_SIZE)",
    }
    for old, new in wrong.items():
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    path = tmp_path / "conformer_streaming.py"
    path.write_text(src)
    proc = run_netc("verify", path, *ARGS, *BATCH, "--no-returnn")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "FAIL" in proc.stdout
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("verify failed:")]
    assert re.match(
        r"verify failed: conformer_streaming_chunked differs from conformer_streaming: \w+ on (eager|torch), "
        r"max\|Δ\| = \S+ > ",
        line,
    ), line
