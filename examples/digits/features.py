"""Log-mel features with numpy: 40 bands, 25 ms windows every 10 ms."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

N_MELS = 40
WINDOW_S, HOP_S = 0.025, 0.010
F_MIN, F_MAX = 20.0, 7600.0


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """A 16-bit mono WAV as float32 samples in [-1, 1), and its sample rate."""
    with wave.open(str(path)) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, path
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0, w.getframerate()


def _mel(f: np.ndarray) -> np.ndarray:
    return 2595.0 * np.log10(1.0 + f / 700.0)


def mel_filterbank(rate: int, n_fft: int) -> np.ndarray:
    """Triangular filters evenly spaced on the mel scale, [n_fft // 2 + 1, N_MELS]."""
    edges = 700.0 * (10.0 ** (np.linspace(_mel(np.float64(F_MIN)), _mel(np.float64(F_MAX)), N_MELS + 2) / 2595.0) - 1.0)
    freqs = np.linspace(0.0, rate / 2, n_fft // 2 + 1)
    lo, mid, hi = edges[:-2], edges[1:-1], edges[2:]
    rise = (freqs[:, None] - lo) / (mid - lo)
    fall = (hi - freqs[:, None]) / (hi - mid)
    return np.maximum(0.0, np.minimum(rise, fall)).astype(np.float32)


def log_mel(samples: np.ndarray, rate: int) -> np.ndarray:
    """[frames, N_MELS] log mel energies of a Hann-windowed power spectrum."""
    win, hop = round(WINDOW_S * rate), round(HOP_S * rate)
    n_fft = 1 << (win - 1).bit_length()
    samples = np.pad(samples, (0, max(0, win - len(samples))))
    frames = 1 + (len(samples) - win) // hop
    idx = np.arange(win)[None, :] + hop * np.arange(frames)[:, None]
    spec = np.abs(np.fft.rfft(samples[idx] * np.hanning(win).astype(np.float32), n=n_fft)) ** 2
    return np.log(spec.astype(np.float32) @ mel_filterbank(rate, n_fft) + 1e-6)


def wav_features(path: Path) -> np.ndarray:
    return log_mel(*read_wav(path))
