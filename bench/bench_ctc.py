"""CTC prefix beam search: netc's (`ctc_prefix_search`: the function the emitted torch module and
eager mode run, batched over the sequences) against flashlight-text's `LexiconFreeDecoder` (the
decoder torchaudio's `ctc_decoder(lexicon=None)` wraps; no LM: `ZeroLM`, hypotheses merged by
log-add, as a prefix search sums a prefix's alignments) and the plain-Python reference of
tests/ctc_reference.py, on the same random log probabilities. The best labels are compared first
(counted: flashlight's pruning differs, see below), then each is timed, medians, 1 thread.

torchaudio itself does not load with the installed torch (its C++ library fails), so flashlight-text
is imported from a separate directory: `pip install --target DIR flashlight-text`, then
`--flashlight DIR` (not installed into the project's environment)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from itertools import groupby
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from ctc_reference import prefix_beam_search  # noqa: E402

from netc.ops.ctc_search import ctc_prefix_beam_search  # noqa: E402


def _median_ms(fn, runs: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--time", type=int, default=100)
    ap.add_argument("--vocab", type=int, default=30, help="labels, without the blank")
    ap.add_argument("--beam", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--flashlight", type=Path, help="a directory holding flashlight-text (pip --target)")
    ap.add_argument("--no-reference", action="store_true", help="leave the plain-Python reference out")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    classes = a.vocab + 1
    logits = torch.randn(a.batch, a.time, classes) * 3.0
    lens = torch.randint(a.time // 2, a.time + 1, (a.batch,))
    lens[0] = a.time
    logp = torch.log_softmax(logits.double(), -1).float()

    labels, out_lens, _ = ctc_prefix_beam_search(logits, lens, a.beam, None, 0.0)
    ours = [labels[b, : out_lens[b]].tolist() for b in range(a.batch)]
    rows = [
        (
            "netc ctc_prefix_search (torch, batched)",
            _median_ms(lambda: ctc_prefix_beam_search(logits, lens, a.beam, None, 0.0), a.runs),
        )
    ]

    if not a.no_reference:
        seqs = [logits[b, : lens[b]].double().tolist() for b in range(a.batch)]
        ref = [prefix_beam_search(s, a.beam)[0] for s in seqs]
        print(f"plain-Python reference: {sum(r == o for r, o in zip(ref, ours))}/{a.batch} best prefixes as netc's")
        rows.append(
            (
                "plain-Python reference (tests/ctc_reference.py)",
                _median_ms(lambda: [prefix_beam_search(s, a.beam) for s in seqs], a.runs),
            )
        )

    if a.flashlight:
        sys.path.insert(0, str(a.flashlight))
        from flashlight.lib.text.decoder import CriterionType, LexiconFreeDecoder, LexiconFreeDecoderOptions, ZeroLM

        blank = classes - 1
        opts = LexiconFreeDecoderOptions(
            beam_size=a.beam,
            beam_size_token=classes,
            beam_threshold=1e30,
            lm_weight=0.0,
            sil_score=0.0,
            log_add=True,
            criterion_type=CriterionType.CTC,
        )
        decoder = LexiconFreeDecoder(opts, ZeroLM(), blank, blank, [])
        frames = [logp[b, : lens[b]].contiguous() for b in range(a.batch)]

        def decode_all():
            return [decoder.decode(f.data_ptr(), f.shape[0], classes)[0] for f in frames]

        theirs = [[t for t, _ in groupby(r.tokens) if t != blank] for r in decode_all()]
        same = sum(t == o for t, o in zip(theirs, ours))
        print(f"flashlight LexiconFreeDecoder: {same}/{a.batch} best prefixes as netc's")
        rows.append(("flashlight-text LexiconFreeDecoder (C++, per sequence)", _median_ms(decode_all, a.runs)))

    print(f"\nbatch {a.batch}, up to {a.time} frames, {a.vocab} labels + blank, beam {a.beam}, 1 thread\n")
    print("| decoder | ms per batch |\n|---|---|")
    for name, ms in rows:
        print(f"| {name} | {ms:.1f} |")


if __name__ == "__main__":
    main()
