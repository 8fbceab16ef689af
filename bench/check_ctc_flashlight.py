"""netc's `ctc_prefix_search(..., method="flashlight")` against flashlight-text's `LexiconFreeDecoder`
(the decoder torchaudio's `ctc_decoder(lexicon=None)` wraps) on many small random searches: 2 to 6
classes (the blank last: repeats, merges and near-ties are frequent), beams 1 to 6, the options
drawn (`beam_size_token` all or 1 to all classes, `beam_threshold` none or 0.5 to 8, `log_add` or
the maximum), each case a padded batch of 4 sequences of 0 to 12 frames; without an LM
(flashlight's `ZeroLM`) and with a neural LM (a tanh RNN of the labels, random weights, float64:
netc's `lm=step` function, flashlight's custom `LM` holding one state per prefix, as torchaudio's
`CTCDecoderLM`; no end-of-sentence score). flashlight's silence is the blank, its silence score 0.
Counts the sequences whose best hypothesis (labels, score within 1e-4) netc's search finds, and
those where netc's standard prefix search (`method="prefix"`) finds another.

The functions compared are those eager mode and the torch module run (netc.ops.ctc_search).

    .venv/bin/python bench/check_ctc_flashlight.py --flashlight DIR [--seeds 60]

DIR: flashlight-text installed apart (`pip install --target DIR flashlight-text`).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from itertools import groupby
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from netc.ops.ctc_search import (  # noqa: E402
    ctc_flashlight_search,
    ctc_flashlight_search_lm,
    ctc_prefix_beam_search,
    ctc_prefix_beam_search_lm,
)


class RnnLm(torch.nn.Module):
    """`step(labels [n], h [n, H]) -> (log p(next) [n, vocab], h)`, float64."""

    def __init__(self, vocab: int, hidden: int):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden).double()
        self.rec = torch.nn.Linear(hidden, hidden).double()
        self.out = torch.nn.Linear(hidden, vocab).double()
        for p in self.parameters():
            torch.nn.init.normal_(p, std=1.5)

    @torch.no_grad()
    def step(self, labels: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.embed(labels) + self.rec(h))
        return torch.log_softmax(self.out(h), dim=-1), h


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flashlight", type=Path, required=True, help="a directory holding flashlight-text")
    ap.add_argument("--seeds", type=int, default=60)
    args = ap.parse_args()
    sys.path.insert(0, str(args.flashlight))
    from flashlight.lib.text.decoder import (
        LM,
        CriterionType,
        LexiconFreeDecoder,
        LexiconFreeDecoderOptions,
        LMState,
        ZeroLM,
    )

    class FlashlightLm(LM):
        def __init__(self, lm: RnnLm, bos: int, hidden: int):
            LM.__init__(self)
            self.lm, self.bos, self.hidden, self.states = lm, bos, hidden, {}

        def start(self, start_with_nothing: bool):
            state = LMState()
            self.states = {state: self.lm.step(torch.tensor([self.bos]), torch.zeros(1, self.hidden).double())}
            return state

        def score(self, state, token: int):
            child = state.child(token)
            logp, h = self.states[state]
            if child not in self.states:
                self.states[child] = self.lm.step(torch.tensor([token]), h)
            return child, float(logp[0, token])

        def finish(self, state):
            return state, 0.0

    torch.set_num_threads(1)
    for with_lm in (False, True):
        total = same = other = 0
        worst = 0.0
        for seed in range(args.seeds):
            rng = random.Random(seed + 1000 * with_lm)
            torch.manual_seed(seed + 1000 * with_lm)
            classes, beam = rng.randint(2, 6), rng.randint(1, 6)
            size = rng.choice([0, 0, rng.randint(1, classes)])
            threshold = rng.choice([math.inf, rng.uniform(0.5, 8.0)])
            log_add = rng.random() < 0.6
            lens = [rng.randint(0, 12) for _ in range(4)]
            emissions = torch.log_softmax(torch.randn(4, max(lens), classes).double() * 2.0, -1).float()
            x, n_lens = emissions.double(), torch.tensor(lens)
            hidden, bos, weight = 4, rng.randrange(classes - 1), rng.uniform(0.2, 2.0) if with_lm else 0.0
            lm = RnnLm(classes - 1, hidden) if with_lm else None
            options = (size, threshold, log_add)
            if lm is None:
                labels, out_lens, scores = ctc_flashlight_search(x, n_lens, beam, None, 0.0, *options)
                std, std_lens, _ = ctc_prefix_beam_search(x, n_lens, beam, None, 0.0)
            else:
                state = (torch.zeros(4, hidden).double(),)
                labels, out_lens, scores = ctc_flashlight_search_lm(
                    x, n_lens, beam, lm.step, state, bos, weight, *options
                )
                std, std_lens, _ = ctc_prefix_beam_search_lm(x, n_lens, beam, lm.step, state, bos, weight)
            opts = LexiconFreeDecoderOptions(
                beam_size=beam,
                beam_size_token=size or classes,
                beam_threshold=min(threshold, 1e30),
                lm_weight=weight,
                sil_score=0.0,
                log_add=log_add,
                criterion_type=CriterionType.CTC,
            )
            blank = classes - 1
            for b, n in enumerate(lens):
                if n == 0:
                    continue  # flashlight decodes no empty input
                flm = FlashlightLm(lm, bos, hidden) if lm is not None else ZeroLM()
                decoder = LexiconFreeDecoder(opts, flm, blank, blank, [])
                frames = emissions[b, :n].contiguous()
                best = decoder.decode(frames.data_ptr(), n, classes)[0]
                theirs = [t for t, _ in groupby(best.tokens) if t != blank]
                ours = labels[b, : out_lens[b]].tolist()
                total += 1
                diff = abs(float(scores[b]) - best.score)
                worst = max(worst, diff)
                same += ours == theirs and diff <= 1e-4
                other += std[b, : std_lens[b]].tolist() != theirs
        lm_note = "with a neural LM" if with_lm else "without an LM"
        print(
            f"{lm_note}: {total} sequences: flashlight's best hypothesis is netc flashlight's in {same} "
            f"(score differences up to {worst:.1e}); netc's prefix search finds another in {other}"
        )


if __name__ == "__main__":
    main()
