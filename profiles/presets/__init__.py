"""Built-in preset profiles for sizing before launch, and adjusting them to the user's figures.

Each preset is a real profile of the same schema (`profiles/presets/<name>.json`), computed by
`python -m profiles.presets.generate` from a shipped public trace or from a seeded synthetic
trace run through the same profiler; `source.derivation` in each says which. A user's figures
(rate, peak-to-mean, mean lengths, a shared prefix) adjust it as `preset_profile` documents.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from typing import Any

import numpy as np

from contracts.errors import ConfigError, InputError
from contracts.options import build
from profiles.model import (
    Arrivals,
    LengthClasses,
    Lengths,
    LengthStats,
    LruPoint,
    Prefix,
    Profile,
    SharedPrefix,
)
from profiles.options import PresetFigures

PRESETS: dict[str, str] = {
    "chat": "conversation service: Azure LLM inference conversation trace (1 h, 2023-11-16)",
    "rag": "long shared context, short answers: the Mooncake (FAST'25) synthetic trace",
    "agent": "multi-turn tool-using sessions with a long shared system prompt (synthetic)",
    "batch": "offline batch jobs: long outputs, smooth arrivals, one shared template (synthetic)",
}
SHARED_PREFIX_BLOCK_TOKENS = 16


def _load(name: str) -> Profile:
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}")
    text = resources.files("profiles.presets").joinpath(f"{name}.json").read_text()
    return Profile.model_validate(json.loads(text))


def _scale_rates(a: Arrivals, factor: float) -> Arrivals:
    """The same arrival shape at `factor` times the level: every rate scales; the per-window
    Fano factor follows a doubly-stochastic Poisson process whose intensity scales
    (F' = 1 + factor (F - 1)); inter-arrival CV and gamma shape are kept."""
    return a.model_copy(
        update={
            "mean_rate_rps": a.mean_rate_rps * factor,
            "peak_rate_rps": {k: v * factor for k, v in a.peak_rate_rps.items()},
            "fano": {k: 1 + factor * (v - 1) for k, v in a.fano.items()},
            "window_rate_percentiles": {
                k: [x * factor for x in v] for k, v in a.window_rate_percentiles.items()
            },
            "hour_of_day": [x * factor for x in a.hour_of_day] if a.hour_of_day else None,
            "weekday": [x * factor for x in a.weekday] if a.weekday else None,
            "clock_hours": a.clock_hours.model_copy(
                update={"peak_rps": [x * factor for x in a.clock_hours.peak_rps]}
            )
            if a.clock_hours
            else None,
            "bursts": [
                b.model_copy(update={"peak_rate_rps": b.peak_rate_rps * factor}) for b in a.bursts
            ],
            "rate_series": a.rate_series.model_copy(
                update={"rates_rps": [x * factor for x in a.rate_series.rates_rps]}
            ),
        }
    )


def _stretch_peaks(a: Arrivals, peak_to_mean: float) -> Arrivals:
    """Stretch every rate's distance from the mean so the 60 s peak-to-mean is `peak_to_mean`;
    the variance part of the Fano factor scales with the square of the stretch."""
    old = a.peak_to_mean["60s"]
    if old <= 1.0:
        raise ConfigError(
            "--peak-to-mean: this preset's 60 s rates are flat and cannot be stretched"
        )
    k = (peak_to_mean - 1.0) / (old - 1.0)
    m = a.mean_rate_rps

    def s(x: float) -> float:
        return max(0.0, m + k * (x - m))

    peaks = {w: s(v) for w, v in a.peak_rate_rps.items()}
    return a.model_copy(
        update={
            "peak_rate_rps": peaks,
            "peak_to_mean": {w: v / m for w, v in peaks.items()},
            "fano": {w: max(0.0, 1 + k * k * (v - 1)) for w, v in a.fano.items()},
            "window_rate_percentiles": {
                w: [s(x) for x in v] for w, v in a.window_rate_percentiles.items()
            },
            "hour_of_day": [s(x) for x in a.hour_of_day] if a.hour_of_day else None,
            "weekday": [s(x) for x in a.weekday] if a.weekday else None,
            "bursts": [
                b.model_copy(update={"peak_rate_rps": s(b.peak_rate_rps)}) for b in a.bursts
            ],
            "rate_series": a.rate_series.model_copy(
                update={"rates_rps": [s(x) for x in a.rate_series.rates_rps]}
            ),
        }
    )


def _scale_length(st: LengthStats, f: float) -> LengthStats:
    return st.model_copy(
        update={
            "mean": st.mean * f,
            "p50": st.p50 * f,
            "p90": st.p90 * f,
            "p95": st.p95 * f,
            "p99": st.p99 * f,
            "max": st.max * f,
            "min": st.min * f,
            "histogram": st.histogram.model_copy(
                update={"edges": [e * f for e in st.histogram.edges]}
            ),
        }
    )


def _classes_from_pairs(c: LengthClasses, pairs: list[tuple[int, int]]) -> LengthClasses:
    inputs = np.array([p[0] for p in pairs])
    n = max(inputs.size, 1)
    return c.model_copy(
        update={
            "shares": {
                "short": float((inputs <= c.short_max_tokens).sum() / n),
                "medium": float(
                    ((inputs > c.short_max_tokens) & (inputs < c.long_min_tokens)).sum() / n
                ),
                "long": float((inputs >= c.long_min_tokens).sum() / n),
            }
        }
    )


def _scale_lengths(ln: Lengths, fin: float, fout: float) -> Lengths:
    pairs = [(max(1, round(i * fin)), max(1, round(o * fout))) for i, o in ln.sampler.pairs]
    return ln.model_copy(
        update={
            "input": _scale_length(ln.input, fin),
            "output": _scale_length(ln.output, fout),
            "sampler": ln.sampler.model_copy(update={"pairs": pairs}),
            "classes": _classes_from_pairs(ln.classes, pairs),
        }
    )


def shared_prefix_stats(tokens: int, share: float, input_mean: float, block_tokens: int) -> Prefix:
    """Prefix statistics of traffic where a share `share` of requests starts with one common
    `tokens`-token prefix and the rest of every prompt is unique.

    Ideal hit ratio: share x (prefix rounded down to whole blocks) / mean input. LRU: the
    prefix stays cached once the cache holds it plus the unique tokens touched between two of
    its uses (about input_mean / share), and is lost below that.
    """
    aligned = (tokens // block_tokens) * block_tokens
    ideal = min(1.0, share * aligned / input_mean)
    needed = aligned + input_mean / share
    sizes = []
    size = 4096
    while size < 4 * needed:
        sizes.append(size)
        size *= 2
    sizes.append(size)
    return Prefix(
        available=True,
        block_tokens=block_tokens,
        ideal_hit_ratio=ideal,
        lru_hit_ratio=[
            LruPoint(cache_tokens=s, hit_ratio=ideal if s >= needed else 0.0) for s in sizes
        ],
        top_prefixes=[SharedPrefix(prefix_tokens=tokens, request_share=share, token_share=ideal)],
        top_prefixes_request_share=share,
        top_prefixes_token_share=min(1.0, share * tokens / input_mean),
        hashes_from="preset",
    )


def _reshuffle(ln: Lengths, seed: int) -> Lengths:
    if seed == ln.sampler.seed:
        return ln
    order = np.random.default_rng(seed).permutation(len(ln.sampler.pairs))
    pairs = [ln.sampler.pairs[i] for i in order]
    return ln.model_copy(
        update={"sampler": ln.sampler.model_copy(update={"pairs": pairs, "seed": seed})}
    )


def preset_profile(
    name: str,
    *,
    rate_rps: float | None = None,
    peak_to_mean: float | None = None,
    input_mean: float | None = None,
    output_mean: float | None = None,
    shared_prefix_tokens: int | None = None,
    shared_prefix_share: float | None = None,
    seed: int = 0,
) -> Profile:
    """The preset `name` (one of PRESETS), adjusted by the user's figures.

    - `rate_rps`: every rate scales to this mean (shape kept; see `_scale_rates`);
    - `peak_to_mean`: the 60 s peak-to-mean, by stretching rates around the mean;
    - `input_mean` / `output_mean`: lengths scale by a factor (quantiles, histogram, sampler
      pairs; short/medium/long shares recomputed from the scaled pairs); prompt-prefix sizes
      scale with the inputs so prefix shares stay;
    - `shared_prefix_tokens` with `shared_prefix_share`: replaces the prefix-reuse statistics
      with one shared prefix (see `shared_prefix_stats`).
    `seed` shuffles the order of the sampler's stored pairs (recorded as the sampler's seed).
    Raises InputError for an unknown preset, ConfigError for a figure outside PresetFigures'
    bounds.
    """
    # each figure held to its bound in PresetFigures (ConfigError naming it as --rate-rps ...)
    build(
        PresetFigures, lambda field: "--" + field.replace("_", "-"), rate_rps=rate_rps,
        peak_to_mean=peak_to_mean, input_mean=input_mean, output_mean=output_mean,
        shared_prefix_tokens=shared_prefix_tokens, shared_prefix_share=shared_prefix_share,
    )  # fmt: skip
    p = _load(name)
    notes: list[str] = []
    arrivals = p.arrivals
    if rate_rps is not None:
        arrivals = _scale_rates(arrivals, rate_rps / arrivals.mean_rate_rps)
        notes.append(f"rates scaled to a mean of {rate_rps:g} req/s")
    if peak_to_mean is not None:
        arrivals = _stretch_peaks(arrivals, peak_to_mean)
        notes.append(f"60 s peak-to-mean set to {peak_to_mean:g}")
    fin = input_mean / p.lengths.input.mean if input_mean is not None else 1.0
    fout = output_mean / p.lengths.output.mean if output_mean is not None else 1.0
    lengths = p.lengths
    prefix = p.prefix
    sessions = p.sessions
    if fin != 1.0 or fout != 1.0:
        lengths = _scale_lengths(lengths, fin, fout)
        notes.append(f"input lengths x{fin:.3g}, output lengths x{fout:.3g}")
    if fin != 1.0:
        prefix = prefix.model_copy(
            update={
                "lru_hit_ratio": [
                    pt.model_copy(update={"cache_tokens": max(1, round(pt.cache_tokens * fin))})
                    for pt in prefix.lru_hit_ratio
                ],
                "top_prefixes": [
                    sp.model_copy(update={"prefix_tokens": max(1, round(sp.prefix_tokens * fin))})
                    for sp in prefix.top_prefixes
                ],
            }
        )
        if sessions.context_growth_tokens is not None:
            g = sessions.context_growth_tokens
            sessions = sessions.model_copy(
                update={
                    "context_growth_tokens": g.model_copy(
                        update={
                            k: getattr(g, k) * fin for k in ("mean", "p50", "p90", "p99", "max")
                        }
                    )
                }
            )
    if shared_prefix_tokens is not None and shared_prefix_share is not None:
        prefix = shared_prefix_stats(
            shared_prefix_tokens,
            shared_prefix_share,
            lengths.input.mean,
            prefix.block_tokens if prefix.available else SHARED_PREFIX_BLOCK_TOKENS,
        )
        notes.append(
            f"prefix reuse replaced: {shared_prefix_share:g} of requests share a "
            f"{shared_prefix_tokens}-token prefix"
        )
    spec: dict[str, Any] = {
        "preset": name,
        "rate_rps": rate_rps,
        "peak_to_mean": peak_to_mean,
        "input_mean": input_mean,
        "output_mean": output_mean,
        "shared_prefix_tokens": shared_prefix_tokens,
        "shared_prefix_share": shared_prefix_share,
        "seed": seed,
    }
    derivation = p.source.derivation or ""
    if notes:
        derivation += " Adjusted: " + "; ".join(notes) + "."
    source = p.source.model_copy(
        update={
            "digest": hashlib.sha256(
                (p.source.digest + json.dumps(spec, sort_keys=True)).encode()
            ).hexdigest(),
            "derivation": derivation,
        }
    )
    return p.model_copy(
        update={
            "arrivals": arrivals,
            "lengths": _reshuffle(lengths, seed),
            "prefix": prefix,
            "sessions": sessions,
            "source": source,
        }
    )
