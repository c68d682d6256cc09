"""The latency floor: what an idle instance of one configuration achieves, below which no
instance count meets an SLO.

A lone request, with the engine to itself, still prefills its whole prompt before its first
token and decodes one token a step after it. For a percentile SLO `ttft:p95<=1s` the floor is
the engine model's TTFT of a lone request with the profile's p95 prompt (the tail of the
prompts sets the tail of an idle fleet's TTFT); `e2e` adds the p-quantile output's decode,
`tpot` is one request's decode step. When the floor is above the threshold, more instances
only add idle ones: the advice is a faster GPU, more tensor parallelism, shorter prompts or
prefix caching of what the prompts share, never "plan more instances". Pure: the engine model
runs in virtual time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contracts.errors import RunError
from planner.engine import EngineConfig, EngineRequest
from planner.engine.engine import simulate
from planner.slo.spec import PercentileConstraint, Slo, format_duration
from profiles.model import LengthStats, Profile

FLOOR_METRICS = ("ttft", "tpot", "e2e")
# A floor at this share of its threshold or more leaves the queue little room: the limit is
# then set by latency, not throughput, and the answer says so (`LatencyFloor.near`).
NEAR_SHARE = 0.75


class BelowFloorError(RunError):
    """The SLO asks for less latency than an idle instance of the configuration achieves:
    no instance count meets it (exit code 1)."""


@dataclass(frozen=True, kw_only=True)
class LatencyFloor:
    """One SLO constraint against what a lone request sees on an idle instance."""

    constraint: str  # "ttft:p95"
    threshold_s: float
    floor_s: float
    prompt_tokens: int  # the profile's prompt at the constraint's quantile
    output_tokens: int
    gpu: str
    tp: int

    @property
    def binds(self) -> bool:
        """The threshold is below the floor: no instance count meets it."""
        return self.floor_s > self.threshold_s

    @property
    def near(self) -> bool:
        """Met when idle, but by so little (the floor at NEAR_SHARE of the threshold or more)
        that little load fits under it."""
        return not self.binds and self.floor_s >= NEAR_SHARE * self.threshold_s

    def near_sentence(self, limit_rps: float) -> str:
        """Why a limit is low when the SLO sits near the floor: what the user reads."""
        return (
            f"{self.constraint} <= {format_duration(self.threshold_s)} is near the latency floor "
            f"of {self.gpu} x {self.tp}: even idle, one instance's {self.constraint} is "
            f"{self.floor_s:.3g} s ({self.floor_s / self.threshold_s:.0%} of it), set by "
            f"{self.what_binds()}, so the limit ({limit_rps:.3g} req/s) is set by latency, not "
            "throughput, and more load per instance does not fit under it. What moves it: a "
            "faster GPU (--gpu), more tensor parallelism (--tp), shorter prompts, prefix caching "
            f"of what the prompts share, or an SLO further above {self.floor_s:.3g} s."
        )

    def what_binds(self) -> str:
        metric = self.constraint.split(":")[0]
        if metric == "tpot":
            return "the decode step of a lone request (HBM bandwidth: the weights read per token)"
        prompt = f"{self.prompt_tokens:,} tokens"
        prefill = f"the prefill of the profile's {self._stat()} prompt ({prompt})"
        if metric == "e2e":
            return f"{prefill} and the decode of its {self.output_tokens:,} output tokens"
        return prefill

    def _stat(self) -> str:
        return self.constraint.split(":")[1] if ":" in self.constraint else "mean"

    def sentence(self) -> str:
        """What the user reads: the floor, what binds and what would move it."""
        return (
            f"{self.constraint} <= {format_duration(self.threshold_s)} is below the latency floor "
            f"of {self.gpu} x {self.tp}: even idle, one instance's {self.constraint} is "
            f"{self.floor_s:.3g} s, set by {self.what_binds()}. No instance count meets it; "
            "what moves the floor: a faster GPU (--gpu), more tensor parallelism (--tp), shorter "
            "prompts, or prefix caching of what the prompts share; or an SLO above "
            f"{self.floor_s:.3g} s."
        )


def _quantile(stats: LengthStats, q: float | None) -> int:
    """The length at quantile q (None: the mean) from the profile's stored quantiles,
    interpolated between them (p50, p90, p95, p99, max)."""
    if q is None:
        return max(1, round(stats.mean))
    qs = [0.0, 0.5, 0.9, 0.95, 0.99, 1.0]
    values = [stats.min, stats.p50, stats.p90, stats.p95, stats.p99, stats.max]
    return max(1, round(float(np.interp(q, qs, values))))


def _floor_of(c: PercentileConstraint, config: EngineConfig, profile: Profile) -> LatencyFloor:
    q = c.quantile
    prompt = _quantile(profile.lengths.input, q if c.metric != "tpot" else None)
    output = max(2, _quantile(profile.lengths.output, q if c.metric == "e2e" else None))
    room = config.effective_max_model_len - output
    prompt = max(1, min(prompt, room))
    alone = EngineRequest(
        request_id="floor", prompt_tokens=prompt, max_tokens=output, min_tokens=output,
        arrival_s=0.0,
    )  # fmt: skip
    timeline = simulate([alone], config)[0]
    ttft, e2e = timeline.ttft_s or 0.0, timeline.e2e_s or 0.0
    value = {"ttft": ttft, "e2e": e2e, "tpot": (e2e - ttft) / max(output - 1, 1)}[c.metric]
    return LatencyFloor(
        constraint=c.name, threshold_s=c.threshold_s, floor_s=value, prompt_tokens=prompt,
        output_tokens=output, gpu=config.gpu.name, tp=config.tp,
    )  # fmt: skip


def reuses_prefixes(config: EngineConfig, profile: Profile) -> bool:
    """The engine caches prefixes and the profile's prompts share some: a long prompt may be
    mostly cached (a session's history), so a lone uncached prefill bounds nothing."""
    prefix = profile.prefix
    return config.prefix_caching and prefix.available and (prefix.ideal_hit_ratio or 0.0) > 0


def latency_floors(config: EngineConfig, profile: Profile, slo: Slo) -> list[LatencyFloor]:
    """The floor of each TTFT, TPOT and E2E percentile constraint of `slo` on `config`;
    TTFT and E2E only where no prompt may come from the prefix cache (`reuses_prefixes`)."""
    metrics = ("tpot",) if reuses_prefixes(config, profile) else FLOOR_METRICS
    return [_floor_of(c, config, profile) for c in slo.percentiles if c.metric in metrics]


def check_floor(config: EngineConfig, profile: Profile, slo: Slo | None) -> None:
    """Raise BelowFloorError naming the floor, what binds and what moves it when any
    constraint of `slo` is below what an idle instance of `config` achieves."""
    if slo is None:
        return
    below = [f for f in latency_floors(config, profile, slo) if f.binds]
    if below:
        raise BelowFloorError(" ".join(f.sentence() for f in below))
