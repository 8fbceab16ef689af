"""The benchmark script still runs (it checks its variants agree before timing); no timing is asserted."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def _bench(script: str, *args: str) -> str:
    """The stdout of `bench/<script>` run with `args`, which must succeed."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _variants(stdout: str) -> list[str]:
    """The variant names of a `report` table (its indented rows; other lines may come before its title)."""
    return [line.split("  ")[1].strip() for line in stdout.splitlines() if line.startswith("  ")]


def test_bench_torch_runs_and_its_variants_agree():
    rows = _variants(_bench("bench_torch.py", "--batch", "3", "--time", "6", "--runs", "1"))
    assert rows == [
        "netc",
        "netc, no fusion",
        "netc, no hoisting",
        "hand loop",
        "netc Lstm op",
        "netc LstmCell",
        "netc LstmCell, no fusion",
        "nn.LSTM (native)",
    ]


def test_bench_gru_runs_and_its_variants_agree():
    rows = _variants(_bench("bench_gru.py", "--batch", "3", "--time", "6", "--runs", "1"))
    assert rows == ["netc", "netc, no fusion", "netc GruCell", "netc GruCell, no fusion", "nn.GRU (native)"]


def test_bench_train_checks_equal_losses_and_runs():
    rows = _variants(_bench("bench_train.py", "--batch", "3", "--enc", "7", "--dec", "4", "--runs", "1"))
    assert rows == ["netc torch module", "hand-written torch", "RETURNN (TensorFlow)"]


def test_bench_check_runs_every_row_on_a_small_project():
    out = _bench("bench_check.py", "--models", "2", "--runs", "1")
    rows = [line for line in out.splitlines() if line.startswith("| ") and "seconds" not in line]
    assert len(rows) == 6 and rows[0].startswith("| 2 × `netc check MODEL")


def test_bench_pool_runs_and_its_variants_agree():
    out = _bench("bench_pool.py", "--batch", "3", "--time", "9", "--runs", "1")
    rows = [line.split(",")[0].split()[0] + line.split(",")[1].split("  ")[0] for line in out.splitlines()[1:]]
    assert rows == ["torch max_pool", "RETURNN max_pool", "torch end loop", "RETURNN end loop"]


def test_bench_speed_writes_its_table(tmp_path):
    out = tmp_path / "RESULTS.md"
    _bench("bench_speed.py", "--runs", "1", "--statements", "20", "--no-returnn", "--no-attention", "--out", str(out))
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ") and line != "| what | result |"]
    assert any("nn.LSTM" in r for r in rows) and any("compile 20 statements → torch" in r for r in rows)
    assert any("LstmCell" in r for r in rows) and any("nn.GRU" in r for r in rows)
    assert rows[-1].startswith("| `netc compile examples/attention.py`")


def test_bench_attention_runs_and_its_variants_agree():
    rows = _variants(_bench("bench_attention.py", "--batch", "3", "--enc", "7", "--dec", "4", "--runs", "1"))
    assert rows == ["netc", "netc, no hoisting", "naive hand loop", "hoisted hand loop"]


def test_bench_lsp_times_the_server_and_the_command():
    out = _bench("bench_lsp.py", "--runs", "1")
    rows = [line for line in out.splitlines() if line.startswith("| `netc")]
    assert [r.split(" | ")[0] for r in rows] == [
        "| `netc lsp`: a change to its diagnostics",
        "| `netc compile` as a process (per save, without the server)",
    ]
    assert all(float(r.split(" | ")[1]) > 0 for r in rows)


def test_bench_transducer_runs_and_eager_finds_what_torch_finds():
    out = _bench("bench_transducer.py", "--batch", "2", "--time", "6", "--runs", "1")
    assert _variants(out) == [
        "netc torch (greedy)",
        "netc eager (greedy)",
        "netc torch (modified)",
        "netc eager (modified)",
        "netc torch (time_sync)",
        "netc eager (time_sync)",
        "netc torch (graves)",
        "netc eager (graves)",
    ]
    assert "torchaudio left out: no --torchaudio DIR" in out


def test_bench_streaming_checks_the_stream_and_prints_its_rows():
    out = _bench("bench_streaming.py", "--time", "6", "--runs", "1")
    rows = [
        line.split(" | ")[0] for line in out.splitlines() if line.startswith("| step") or line.startswith("| whole")
    ]
    assert rows == [
        "| step module, onnx (host runner)",
        "| step module, torchscript (host runner)",
        "| whole-sequence torch module (one call)",
    ]


def test_bench_chunked_training_checks_the_two_forms_and_prints_their_rows():
    out = _bench("bench_chunked_training.py", "--batch", "2", "--time", "20", "--runs", "1")
    rows = [line.split(" | ")[0] for line in out.splitlines() if line.startswith("| training step")]
    assert rows == [
        "| training step: conformer_streaming (torch module)",
        "| training step: conformer_streaming_chunked (torch module)",
    ]
