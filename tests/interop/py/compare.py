#!/usr/bin/env python3
"""Does a recording contain the speech of a reference WAV? Shared by every interop peer.

Used as a module by lk_peer.py and as a command by the browser driver (drive.mjs):

    compare.py RECORDED.wav REFERENCE.wav [--threshold 0.9] [--tail SECONDS] [--json]

prints the verdict (JSON with --json) and exits 0 iff it matches.

Why not one correlation of the whole reference: publishers loop their WAV (Chromium's fake
microphone always loops the file, from whatever point it is at when the track starts), and the
receiving side of WebRTC (NetEq) may stretch or shorten a few milliseconds while its jitter buffer
settles. A single alignment of a 5 s sentence is brittle against both. So the reference is cut into
half-second windows that contain speech, each window is searched for in the whole recording (normalised
cross-correlation over every lag, via FFT), and the verdict asks that the typical window is found
almost unchanged (median >= threshold) and that nearly all of them are (coverage). Silence,
noise, a beep or a *different* sentence score far below 0.9, so energy alone never passes.
"""

from __future__ import annotations

import argparse
import json
import sys
import wave

import numpy as np

SAMPLE_RATE = 48_000
THRESHOLD = 0.9
# Share of speech windows that must reach the threshold: tolerates one window hit by a glitch.
MIN_COVERAGE = 0.75
# Half-second windows: a jitter-buffer stretch spoils only the one or two windows it falls in,
# while a different sentence still scores below 0.45 (measured on this harness's recordings).
WINDOW_SECONDS = 0.5
HOP_SECONDS = 0.25
# A window counts as speech when it is no more than this far below the loudest window.
SPEECH_RANGE_DB = 25.0
# A recording stretch with less than this share of a window's energy (-40 dB) counts as silent.
QUIET_STRETCH = 1e-4


def read_wav(path: str) -> tuple[np.ndarray, int]:
    """16-bit PCM WAV -> mono float32 in [-1, 1] and its sample rate."""
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM is supported")
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
        return pcm.reshape(-1, w.getnchannels()).mean(axis=1), w.getframerate()


def write_wav(path: str, samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> None:
    """Mono int16 (or float in [-1, 1]) samples -> 16-bit PCM WAV."""
    if samples.dtype != np.int16:
        samples = np.clip(np.round(samples * 32767.0), -32768, 32767).astype(np.int16)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(samples.astype("<i2").tobytes())


def _rms_db(x: np.ndarray) -> float:
    return float(20.0 * np.log10(np.sqrt(np.mean(np.square(x, dtype=np.float64))) + 1e-9))


def audible_seconds(samples: np.ndarray, sample_rate: int = SAMPLE_RATE, floor_db: float = -50.0) -> float:
    """Seconds of 20 ms frames louder than floor_db: tells silence from 'something arrived'."""
    n = sample_rate // 50
    frames = samples[: len(samples) // n * n].reshape(-1, n).astype(np.float64)
    if not len(frames):
        return 0.0
    db = 20.0 * np.log10(np.sqrt(np.mean(frames**2, axis=1)) + 1e-9)
    return float(np.count_nonzero(db > floor_db)) * 0.02


def speech_windows(reference: np.ndarray, sample_rate: int) -> list[tuple[int, np.ndarray]]:
    """(offset, samples) of the reference's windows that hold speech."""
    size, hop = int(WINDOW_SECONDS * sample_rate), int(HOP_SECONDS * sample_rate)
    windows = [(start, reference[start : start + size]) for start in range(0, len(reference) - size + 1, hop)]
    if not windows:
        return []
    levels = [_rms_db(w) for _, w in windows]
    loudest = max(levels)
    return [w for w, level in zip(windows, levels) if level > loudest - SPEECH_RANGE_DB]


def best_matches(recorded: np.ndarray, windows: list[np.ndarray]) -> list[tuple[float, int]]:
    """For each window: (max normalised cross-correlation over all lags, lag in samples)."""
    size = len(windows[0])
    lags = len(recorded) - size + 1
    n_fft = 1 << int(np.ceil(np.log2(len(recorded) + size)))
    spectrum = np.fft.rfft(recorded.astype(np.float64), n_fft)
    # Energy of every `size`-long stretch of the recording, for the normalisation.
    cumulative = np.concatenate(([0.0], np.cumsum(recorded.astype(np.float64) ** 2)))
    stretch_energy = cumulative[size : size + lags] - cumulative[:lags]
    results = []
    for window in windows:
        w = window.astype(np.float64)
        dots = np.fft.irfft(spectrum * np.conj(np.fft.rfft(w, n_fft)), n_fft)[:lags]
        energy = np.dot(w, w)
        # Stretches far quieter than the window (digital silence before a track starts) cannot
        # match it; without this floor, FFT rounding divided by ~0 would score them above 1.
        corr = dots / np.sqrt(np.maximum(stretch_energy, energy * QUIET_STRETCH) * energy + 1e-12)
        lag = int(np.argmax(corr))
        results.append((float(corr[lag]), lag))
    return results


def to_16k(samples: np.ndarray, sample_rate: int) -> tuple[np.ndarray, int]:
    """Low-pass at 7 kHz and keep every 3rd sample of 48 kHz audio.

    Speech lives below 8 kHz; above it Opus codes coarsely, so comparing there adds only codec
    noise. A third of the samples also makes the search three times cheaper, which matters
    because peers re-check while they record, on a 2-core machine shared with a browser.
    """
    if sample_rate != 3 * 16_000:
        return samples, sample_rate
    taps = np.arange(-48, 49)
    kernel = np.sinc(taps * (7_000 / (sample_rate / 2))) * np.hanning(len(taps))
    kernel /= kernel.sum()
    return np.convolve(samples, kernel.astype(np.float32), mode="same")[::3], 16_000


def compare(recorded: np.ndarray, reference: np.ndarray, sample_rate: int = SAMPLE_RATE,
            threshold: float = THRESHOLD) -> dict:
    """Verdict on whether `recorded` contains the speech of `reference` (both mono float)."""
    verdict = {
        "ok": False,
        "correlation": 0.0,
        "coverage": 0.0,
        "threshold": threshold,
        "recorded_seconds": round(len(recorded) / sample_rate, 3),
        "audible_seconds": round(audible_seconds(recorded, sample_rate), 3),
        "reference_seconds": round(len(reference) / sample_rate, 3),
    }
    recorded, _ = to_16k(recorded, sample_rate)
    reference, sample_rate = to_16k(reference, sample_rate)
    windows = speech_windows(reference, sample_rate)
    if not windows:
        verdict["reason"] = "the reference holds no speech"
        return verdict
    size = len(windows[0][1])
    if len(recorded) < size:
        verdict["reason"] = f"only {verdict['recorded_seconds']} s recorded; need at least {WINDOW_SECONDS} s"
        return verdict
    matches = best_matches(recorded, [w for _, w in windows])
    scores = np.array([score for score, _ in matches])
    verdict["correlation"] = round(float(np.median(scores)), 4)
    verdict["coverage"] = round(float(np.mean(scores >= threshold)), 3)
    verdict["window_scores"] = [round(float(s), 3) for s in scores]
    # Where in the recording each window was found, relative to its place in the reference: a
    # faithful stream shows one offset (modulo the loop length) for all windows.
    verdict["window_offsets_s"] = [round((lag - start) / sample_rate, 3) for (start, _), (_, lag) in zip(windows, matches)]
    verdict["ok"] = bool(verdict["correlation"] >= threshold and verdict["coverage"] >= MIN_COVERAGE)
    if not verdict["ok"]:
        verdict["reason"] = (
            f"median window correlation {verdict['correlation']} (need >= {threshold}), "
            f"coverage {verdict['coverage']} (need >= {MIN_COVERAGE}), "
            f"{verdict['audible_seconds']} s audible of {verdict['recorded_seconds']} s recorded"
        )
    return verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recorded")
    parser.add_argument("reference")
    parser.add_argument("--threshold", type=float, default=THRESHOLD)
    parser.add_argument("--tail", type=float, help="judge only the last TAIL seconds of the recording")
    parser.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    args = parser.parse_args()
    recorded, rate = read_wav(args.recorded)
    reference, reference_rate = read_wav(args.reference)
    if rate != reference_rate:
        print(f"sample rates differ: {rate} vs {reference_rate} (resample first)", file=sys.stderr)
        return 2
    if args.tail:
        recorded = recorded[-int(args.tail * rate) :]
    verdict = compare(recorded, reference, rate, args.threshold)
    if args.json:
        print(json.dumps(verdict))
    else:
        print(f"{args.recorded} vs {args.reference}: correlation {verdict['correlation']} "
              f"coverage {verdict['coverage']} -> {'MATCH' if verdict['ok'] else 'NO MATCH'}"
              + (f" ({verdict['reason']})" if "reason" in verdict else ""))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
