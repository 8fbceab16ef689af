"""CTC prefix beam search: netc's (`ctc_prefix_search`: the function the emitted torch module and
eager mode run, batched over the sequences) against flashlight-text's `LexiconFreeDecoder` (the
decoder torchaudio's `ctc_decoder(lexicon=None)` wraps; no LM: `ZeroLM`, hypotheses merged by
log-add, as a prefix search sums a prefix's alignments) and the plain-Python reference of
tests/ctc_reference.py, on the same random log probabilities. The best labels are compared first
(counted: netc's standard prefix search keeps other hypotheses than flashlight's; `--method
flashlight` runs netc's `method="flashlight"`, flashlight's search, and the reference's of it),
then each is timed, medians, 1 thread.

With `--lm H`, the same is done with a neural LM of the labels (a tanh RNN, hidden size H, random
weights, `--lm-weight`): netc's `ctc_prefix_search(..., lm=step)` function (each prefix carrying the
LM's state; the LM batched over the new prefixes of a frame), flashlight's decoder with the same
LM wrapped as its custom `LM` (start/score/finish, one state per prefix, as torchaudio's
`CTCDecoderLM`), and the reference with the LM as a function of the prefix.

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

from ctc_reference import flashlight_search, prefix_beam_search  # noqa: E402

from netc.ops.ctc_search import (  # noqa: E402
    ctc_flashlight_search,
    ctc_flashlight_search_lm,
    ctc_prefix_beam_search,
    ctc_prefix_beam_search_lm,
)


class RnnLm(torch.nn.Module):
    """A tanh RNN LM of the labels: `step(labels [n], h [n, H]) -> (log p(next) [n, vocab], h)`."""

    def __init__(self, vocab: int, hidden: int):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.rec = torch.nn.Linear(hidden, hidden)
        self.out = torch.nn.Linear(hidden, vocab)

    @torch.no_grad()
    def step(self, labels: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.embed(labels) + self.rec(h))
        return torch.log_softmax(self.out(h), dim=-1), h

    def next_log_probs(self, bos: int):
        """The LM as a function of the prefix (for the reference), memoised."""
        memo: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = {}

        def at(prefix: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
            if prefix not in memo:
                h = at(prefix[:-1])[1] if prefix else torch.zeros(1, self.rec.in_features)
                memo[prefix] = self.step(torch.tensor([prefix[-1] if prefix else bos]), h)
            return memo[prefix]

        return lambda prefix: at(prefix)[0][0].double().tolist()


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
    ap.add_argument("--lm", type=int, metavar="H", help="search with a neural LM (a tanh RNN of hidden size H)")
    ap.add_argument("--lm-weight", type=float, default=0.5)
    ap.add_argument(
        "--method",
        choices=["prefix", "flashlight"],
        default="prefix",
        help="netc's search (and the reference's): the standard prefix search, or flashlight's (its options as "
        "flashlight's below: every class, no threshold, log-add merges)",
    )
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    classes = a.vocab + 1
    logits = torch.randn(a.batch, a.time, classes) * 3.0
    lens = torch.randint(a.time // 2, a.time + 1, (a.batch,))
    lens[0] = a.time
    logp = torch.log_softmax(logits.double(), -1).float()

    lm = RnnLm(a.vocab, a.lm) if a.lm else None
    bos, weight = 0, a.lm_weight if a.lm else 0.0

    flashlight = a.method == "flashlight"
    options = (0, float("inf"), True)  # flashlight's options below: every class, no threshold, log-add

    def ours_search():
        if lm is None:
            if flashlight:
                return ctc_flashlight_search(logits, lens, a.beam, None, 0.0, *options)
            return ctc_prefix_beam_search(logits, lens, a.beam, None, 0.0)
        h0 = torch.zeros(a.batch, a.lm)
        if flashlight:
            return ctc_flashlight_search_lm(logits, lens, a.beam, lm.step, (h0,), bos, weight, *options)
        return ctc_prefix_beam_search_lm(logits, lens, a.beam, lm.step, (h0,), bos, weight)

    labels, out_lens, _ = ours_search()
    ours = [labels[b, : out_lens[b]].tolist() for b in range(a.batch)]
    with_lm = f" with a neural LM (RNN, hidden {a.lm})" if lm else ""
    rows = [(f"netc ctc_prefix_search method={a.method}{with_lm} (torch, batched)", _median_ms(ours_search, a.runs))]

    if not a.no_reference:
        seqs = [logits[b, : lens[b]].double().tolist() for b in range(a.batch)]

        def reference():
            # (a fresh LM function per run: its memo is part of the work)
            search = flashlight_search if flashlight else prefix_beam_search
            return [search(s, a.beam, lm and lm.next_log_probs(bos), weight)[0] for s in seqs]

        ref = reference()
        print(f"plain-Python reference: {sum(r == o for r, o in zip(ref, ours))}/{a.batch} best prefixes as netc's")
        rows.append((f"plain-Python reference (tests/ctc_reference.py){with_lm}", _median_ms(reference, a.runs)))

    if a.flashlight:
        sys.path.insert(0, str(a.flashlight))
        from flashlight.lib.text.decoder import (
            LM,
            CriterionType,
            LexiconFreeDecoder,
            LexiconFreeDecoderOptions,
            LMState,
            ZeroLM,
        )

        class FlashlightLm(LM):
            """`lm` as flashlight's custom LM (torchaudio's `CTCDecoderLM`): a state per prefix,
            holding the LM's log probabilities of the next label and its hidden state."""

            def __init__(self):
                LM.__init__(self)
                self.states: dict = {}

            def start(self, start_with_nothing: bool):
                state = LMState()
                self.states = {state: lm.step(torch.tensor([bos]), torch.zeros(1, a.lm))}
                return state

            def score(self, state, token: int):
                child = state.child(token)
                logp, h = self.states[state]
                if child not in self.states:
                    self.states[child] = lm.step(torch.tensor([token]), h)
                return child, float(logp[0, token])

            def finish(self, state):
                return state, 0.0  # no end-of-sentence score, as netc's search

        blank = classes - 1
        opts = LexiconFreeDecoderOptions(
            beam_size=a.beam,
            beam_size_token=classes,
            beam_threshold=1e30,
            lm_weight=weight,
            sil_score=0.0,
            log_add=True,
            criterion_type=CriterionType.CTC,
        )
        flashlight_lm = FlashlightLm() if lm else ZeroLM()  # held here: the decoder does not keep it alive
        decoder = LexiconFreeDecoder(opts, flashlight_lm, blank, blank, [])
        frames = [logp[b, : lens[b]].contiguous() for b in range(a.batch)]

        def decode_all():
            return [decoder.decode(f.data_ptr(), f.shape[0], classes)[0] for f in frames]

        theirs = [[t for t, _ in groupby(r.tokens) if t != blank] for r in decode_all()]
        same = sum(t == o for t, o in zip(theirs, ours))
        print(f"flashlight LexiconFreeDecoder: {same}/{a.batch} best prefixes as netc's")
        name = "flashlight-text LexiconFreeDecoder (C++, per sequence" + (", the LM in Python)" if lm else ")")
        rows.append((name, _median_ms(decode_all, a.runs)))

    lm_note = f", LM weight {weight}" if lm else ""
    print(f"\nbatch {a.batch}, up to {a.time} frames, {a.vocab} labels + blank, beam {a.beam}{lm_note}, 1 thread\n")
    print("| decoder | ms per batch |\n|---|---|")
    for name, ms in rows:
        print(f"| {name} | {ms:.1f} |")


if __name__ == "__main__":
    main()
