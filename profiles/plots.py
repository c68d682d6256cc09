"""PNG charts of a profile (`capplan profile --plots DIR`): rates, lengths, prefix reuse."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from contracts.errors import InputError  # noqa: E402
from profiles.model import Histogram, Profile  # noqa: E402


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _hist(ax: plt.Axes, h: Histogram, label: str) -> None:
    edges = np.asarray(h.edges, dtype=float)
    edges[0] = max(edges[0], 0.5)  # the [0, 1) bin on a log axis
    ax.stairs(h.counts, edges, fill=True, alpha=0.5, label=label)


def write_plots(profile: Profile, out_dir: str | Path) -> list[Path]:
    """Write the profile's charts into `out_dir` (created); returns the files written."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--plots {out}: cannot create the folder ({err})") from err
    written: list[Path] = []
    a = profile.arrivals

    fig, ax = plt.subplots(figsize=(9, 3.5))
    rates = np.asarray(a.rate_series.rates_rps)
    ax.plot(np.arange(rates.size) * a.rate_series.bin_s / 60, rates, lw=1, label="rate")
    ax.axhline(a.mean_rate_rps, color="k", ls="--", lw=0.8, label=f"mean {a.mean_rate_rps:.2f}")
    for b in a.bursts:
        ax.axvspan(b.start_s / 60, (b.start_s + b.duration_s) / 60, color="r", alpha=0.2)
    ax.set(
        xlabel="minutes since first request",
        ylabel="req/s",
        title=f"Arrival rate ({a.rate_series.bin_s:g} s bins; bursts shaded)",
    )
    ax.legend()
    written.append(_save(fig, out / "arrival_rate.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    for w, pct in a.window_rate_percentiles.items():
        ax.plot(pct, np.arange(len(pct)), label=f"{w} windows")
    ax.set(xlabel="window rate (req/s)", ylabel="percentile", title="Distribution of window rates")
    ax.legend()
    written.append(_save(fig, out / "window_rates.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    _hist(ax, profile.lengths.input.histogram, "input tokens")
    _hist(ax, profile.lengths.output.histogram, "output tokens")
    ax.set_xscale("log")
    ax.set(xlabel="tokens", ylabel="requests", title="Length histograms (log bins)")
    ax.legend()
    written.append(_save(fig, out / "lengths.png"))

    pairs = np.asarray(profile.lengths.sampler.pairs, dtype=float).reshape(-1, 2)
    if pairs.size:
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.scatter(np.maximum(pairs[:, 0], 0.5), np.maximum(pairs[:, 1], 0.5), s=3, alpha=0.4)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="input tokens",
            ylabel="output tokens",
            title=f"Sampled (input, output) pairs, n={len(pairs)}",
        )
        written.append(_save(fig, out / "joint_lengths.png"))

    pr = profile.prefix
    if pr.available and pr.lru_hit_ratio:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(
            [p.cache_tokens for p in pr.lru_hit_ratio],
            [p.hit_ratio for p in pr.lru_hit_ratio],
            marker="o",
            label="LRU",
        )
        if pr.ideal_hit_ratio is not None:
            ax.axhline(
                pr.ideal_hit_ratio,
                color="k",
                ls="--",
                lw=0.8,
                label=f"unlimited {pr.ideal_hit_ratio:.3f}",
            )
        ax.set(
            xscale="log",
            ylim=(0, 1),
            xlabel="prefix cache size (tokens)",
            ylabel="share of prompt tokens hit",
            title=f"Prefix cache hit ratio ({pr.block_tokens}-token blocks)",
        )
        ax.legend()
        written.append(_save(fig, out / "prefix_lru.png"))

    if a.hour_of_day:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.bar(np.arange(24), a.hour_of_day)
        ax.set(xlabel="hour of day (UTC)", ylabel="mean req/s", title="Hour-of-day shape")
        written.append(_save(fig, out / "hour_of_day.png"))
    return written
