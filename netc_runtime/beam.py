"""Eager mode's beam search: one sequence, its hypotheses as rows of the batch.

The model's own Python code runs once per step on all hypotheses at once. Every eager value
records the `version` of the hypotheses its rows belong to (0: before the first choice, one
row); each `choice` makes a new version whose rows continue rows of the one before (`src`).
An op reading values of older versions takes, for each current row, the row it continues
(`rows_from`), so the Python variables that hold state never need re-ordering by hand. The
step itself is the torch module's own beam step (`ops.search.torch_beam_step`), run here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from netc.ops.search import torch_beam_step, torch_sample_step

_namespace: dict = {"torch": torch}
exec(torch_beam_step("beam_step"), _namespace)  # noqa: S102 - netc's own source, not user text
exec(torch_sample_step("sample_step"), _namespace)  # noqa: S102
beam_step, sample_step = _namespace["beam_step"], _namespace["sample_step"]


@dataclass
class Beam:
    size: int
    length_normalization: bool
    sample: bool = False  # draw each hypothesis' labels (`choice(..., sample=True)`)
    seed: int = 0
    seq: int = 0  # the sequence's index in the batch (the draws depend on it, as in torch)
    src: list[torch.Tensor] = field(default_factory=list)  # per choice: new row -> row it continues
    scores: torch.Tensor = field(default_factory=lambda: torch.zeros(1, 1))
    ended: torch.Tensor = field(default_factory=lambda: torch.zeros(1, dtype=torch.bool))
    lens: torch.Tensor = field(default_factory=lambda: torch.zeros(1, dtype=torch.long))
    steps: int = 0  # the steps ended so far (a step may make several choices: versions)
    normalising: int = 0  # the choices per step with length normalization

    @property
    def version(self) -> int:
        return len(self.src)

    def rows_from(self, version: int, to: int) -> torch.Tensor:
        """For each row (hypothesis) of version `to`, the row of `version` it continues."""
        rows = torch.arange(self.src[to - 1].shape[0])
        for src in reversed(self.src[version:to]):
            rows = src[rows]
        return rows

    def choose(self, logp: torch.Tensor, first: bool, length_normalization: bool) -> torch.Tensor:
        """One choice: the new hypotheses' labels (rows of the new version). `first`: the step's
        first choice (a later one extends all hypotheses the one before made, also at step 0).
        `length_normalization`: this choice's own (each choice rescales ended hypotheses as its
        own says, as RETURNN's `choice` layers do); the last one's normalises the final score."""
        self.length_normalization = length_normalization
        if first and not self.steps:
            self.normalising = 0
        self.normalising += length_normalization and not self.steps  # per step: the first step's count
        args = (logp, self.scores.to(logp.dtype), self.ended, self.steps, self.size, length_normalization)
        if self.sample:
            labels, self.scores, src = sample_step(*args, self.seed, self.seq)
        else:
            labels, self.scores, src = beam_step(*args, first)
        self.src.append(src)
        self.ended, self.lens = self.ended[src], self.lens[src]
        return labels

    def end(self, cond: torch.Tensor) -> bool:
        """The step's end condition (one bool per current row); True when all have ended."""
        self.lens = self.lens + (~self.ended).long()  # the ending step counts (appends before `end`)
        self.ended = self.ended | cond
        self.steps += 1
        return bool(self.ended.all())

    def best(self) -> tuple[int, int, float]:
        """The best hypothesis: its row, its length and its score (per step, normalised)."""
        row = int(self.scores[0].argmax())
        score = float(self.scores[0, row])
        if self.length_normalization:  # the step's last choice's: RETURNN's search result is its scores
            score /= self.steps
        return row, int(self.lens[row]), score
