"""Synthesise a spoken digit-string corpus with espeak-ng.

Each utterance is a random string of 2-5 digits ("three zero seven"), spoken by one of espeak-ng's
English voices (an accent such as `en-us` with a voice variant such as `+f3`) at a random speed and
pitch, written as a 16-bit mono WAV (22050 Hz, espeak-ng's rate). The voice variants of the test
set are held out: no training utterance is spoken by them (the accents are shared).

    python examples/digits/make_data.py --data /tmp/digits [--train 2000] [--test 300]

writes <data>/train/*.wav, <data>/test/*.wav and <data>/{train,test}.tsv (file, digits, voice,
speed, pitch).
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
ACCENTS = ("en", "en-us", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029", "en-us-nyc")
TRAIN_VARIANTS = ("m1", "m2", "m3", "m4", "m5", "m6", "f1", "f2", "f3", "f4", "klatt", "klatt2", "croak")
TEST_VARIANTS = ("m7", "f5", "klatt3")  # held out: never heard in training
SPEED = (130, 200)  # words per minute
PITCH = (25, 75)  # espeak-ng's 0-99
MIN_DIGITS, MAX_DIGITS = 2, 5


def espeak() -> str:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise SystemExit("espeak-ng not found: install it (Debian/Ubuntu: apt-get install espeak-ng)")
    return exe


def plan(n: int, variants: tuple[str, ...], rng: np.random.Generator) -> list[dict[str, str]]:
    """n utterances: digits, voice, speed and pitch drawn from rng."""
    rows = []
    for i in range(n):
        digits = "".join(str(d) for d in rng.integers(0, 10, rng.integers(MIN_DIGITS, MAX_DIGITS + 1)))
        voice = f"{ACCENTS[rng.integers(len(ACCENTS))]}+{variants[rng.integers(len(variants))]}"
        speed, pitch = rng.integers(SPEED[0], SPEED[1] + 1), rng.integers(PITCH[0], PITCH[1] + 1)
        rows.append(
            {"file": f"{i:05d}.wav", "digits": digits, "voice": voice, "speed": str(speed), "pitch": str(pitch)}
        )
    return rows


def synthesise(exe: str, row: dict[str, str], out: Path) -> None:
    text = " ".join(DIGITS[int(d)] for d in row["digits"])
    cmd = [exe, "-v", row["voice"], "-s", row["speed"], "-p", row["pitch"], "-w", str(out / row["file"]), text]
    subprocess.run(cmd, check=True, capture_output=True)


def make_corpus(data: Path, n_train: int, n_test: int, seed: int = 0, jobs: int = 2) -> None:
    """Write the corpus under data (replacing a previous one of other sizes)."""
    exe = espeak()
    rng = np.random.default_rng(seed)
    for split, n, variants in (("train", n_train, TRAIN_VARIANTS), ("test", n_test, TEST_VARIANTS)):
        rows = plan(n, variants, rng)
        out = data / split
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        with ThreadPoolExecutor(jobs) as pool:  # each job waits on an espeak-ng process
            list(pool.map(partial(synthesise, exe, out=out), rows))
        with open(data / f"{split}.tsv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t")
            writer.writeheader()
            writer.writerows(rows)


def read_split(data: Path, split: str) -> list[dict[str, str]]:
    with open(data / f"{split}.tsv", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def have_corpus(data: Path, n_train: int, n_test: int) -> bool:
    """Whether data holds a complete corpus of these sizes (made by make_corpus)."""
    for split, n in (("train", n_train), ("test", n_test)):
        if not (data / f"{split}.tsv").is_file():
            return False
        rows = read_split(data, split)
        if len(rows) != n or not all((data / split / r["file"]).is_file() for r in rows):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="where the WAV files go")
    parser.add_argument("--train", type=int, default=2000, help="training utterances")
    parser.add_argument("--test", type=int, default=300, help="test utterances (held-out voices)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    make_corpus(args.data, args.train, args.test, args.seed)
    print(f"wrote {args.train} training and {args.test} test utterances under {args.data}")


if __name__ == "__main__":
    main()
