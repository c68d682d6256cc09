"""SLO specs: parse an SLO string into a typed `Slo` (the verdicts are planner.slo's).

Two forms are supported and named as such:

- percentile form: ``ttft:p95<=2s,tpot:p95<=100ms,e2e:p99<=30s,errors<=1%`` — each latency
  percentile over every scheduled request must be at or below its threshold, and the error
  rate at or below its share;
- attainment form: ``attainment>=95%:ttft<=2s,tpot<=100ms`` — the share of all scheduled
  requests that succeeded and met every per-request threshold (DistServe's SLO attainment)
  must reach the given share.

A bad spec raises ConfigError quoting the bad token and showing the grammar. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from contracts.duration import duration_s
from contracts.errors import ConfigError
from contracts.latency import METRIC_COLUMNS
from contracts.plan import SloTerm

SloKind = Literal["percentile", "attainment"]

GRAMMAR = """\
SLO grammar (comma-separated, units ms or s, thresholds inclusive):
  percentile form: METRIC:STAT<=DURATION[,...][,errors<=SHARE%]
      e.g. ttft:p95<=2s,tpot:p95<=100ms,e2e:p99<=30s,errors<=1%
  attainment form: attainment>=SHARE%:METRIC<=DURATION[,...][,errors<=SHARE%]
      e.g. attainment>=95%:ttft<=2s,tpot<=100ms
  METRIC: ttft | tpot | e2e | itl_max    STAT: p50 .. p99.9 | mean | max
  DURATION: a number followed by ms or s (2s, 1.5s, 100ms)    SHARE: a number followed by %
  Every scheduled request counts: a failed one (HTTP error, refusal, timeout, disconnect)
  misses every threshold (+infinity in a percentile); one still in flight when the window
  closes counts at its age (a lower bound). `--success-only` takes percentiles over the
  successful requests alone (vLLM-bench style)."""

_SHARE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)%$")
_STAT = re.compile(r"^(?:p(\d+(?:\.\d+)?)|mean|max)$")


@dataclass(frozen=True)
class PercentileConstraint:
    """A latency statistic over the successful requests must be <= threshold_s."""

    metric: str  # a key of METRIC_COLUMNS
    stat: str  # "p95", "p99.9", "mean" or "max"
    threshold_s: float

    @property
    def name(self) -> str:
        return f"{self.metric}:{self.stat}"

    @property
    def quantile(self) -> float | None:
        """The statistic as a quantile in [0, 1]; None for the mean."""
        if self.stat == "mean":
            return None
        if self.stat == "max":
            return 1.0
        return float(self.stat[1:]) / 100.0


@dataclass(frozen=True)
class RequestThreshold:
    """A per-request bound: a good request has metric <= threshold_s."""

    metric: str
    threshold_s: float


@dataclass(frozen=True)
class Slo:
    """A parsed SLO. `text` is the spec as given; build one with `parse_slo`."""

    text: str
    kind: SloKind
    percentiles: tuple[PercentileConstraint, ...] = ()
    max_error_rate: float | None = None
    min_attainment: float | None = None
    request_thresholds: tuple[RequestThreshold, ...] = ()
    success_only: bool = False  # percentiles over successful requests only (vLLM-bench style)

    @property
    def tightest_latency_s(self) -> float | None:
        """The smallest latency threshold of the SLO (TTFT, E2E, ITL or TPOT), if any."""
        bounds = [c.threshold_s for c in self.percentiles]
        bounds += [t.threshold_s for t in self.request_thresholds]
        return min(bounds) if bounds else None

    @property
    def lag_bound_s(self) -> float | None:
        """The threshold a load generator's schedule lag is held against: the smallest of the
        latencies a late send could decide (TTFT and E2E, whose requests' arrivals the lag
        moves), else the tightest of all. Per-token times (TPOT, ITL) are measured within
        the stream and a late send leaves them as they are."""
        send = [c.threshold_s for c in self.percentiles if c.metric in ("ttft", "e2e")]
        send += [t.threshold_s for t in self.request_thresholds if t.metric in ("ttft", "e2e")]
        return min(send) if send else self.tightest_latency_s

    @property
    def ttft_bound_s(self) -> float | None:
        """The SLO's tightest TTFT threshold (percentile or per-request), or None: what a
        recovery is read against, by the load test, verify and the autoscale study."""
        bounds = [c.threshold_s for c in self.percentiles if c.metric == "ttft"]
        bounds += [t.threshold_s for t in self.request_thresholds if t.metric == "ttft"]
        return min(bounds) if bounds else None

    @property
    def ttft_goal(self) -> tuple[float, float] | None:
        """(TTFT bound in s, share of requests that must meet it), or None without a TTFT
        term: the attainment form's per-request TTFT bound and its share, else the first TTFT
        percentile and its quantile (0.99 for a mean). What the autoscale study counts a
        request good by."""
        thresholds = [t for t in self.request_thresholds if t.metric == "ttft"]
        if thresholds and self.min_attainment is not None:
            return thresholds[0].threshold_s, self.min_attainment
        ttft = [c for c in self.percentiles if c.metric == "ttft"]
        if ttft:
            return ttft[0].threshold_s, ttft[0].quantile or 0.99
        return None

    @property
    def longest_wait_s(self) -> float | None:
        """The largest TTFT or E2E threshold: past it, a request still running is a miss."""
        bounds = [c.threshold_s for c in self.percentiles if c.metric in ("ttft", "e2e")]
        bounds += [t.threshold_s for t in self.request_thresholds if t.metric in ("ttft", "e2e")]
        return max(bounds) if bounds else None

    def describe(self) -> str:
        """The SLO in words for sentences: 'ttft p95 <= 2 s, tpot p95 <= 100 ms'."""
        parts: list[str] = []
        if self.kind == "attainment":
            assert self.min_attainment is not None
            within = ", ".join(
                f"{t.metric} <= {format_duration(t.threshold_s)}" for t in self.request_thresholds
            )
            parts.append(f"{format_share(self.min_attainment)} of requests within {within}")
        else:
            parts.extend(
                f"{c.metric} {c.stat} <= {format_duration(c.threshold_s)}" for c in self.percentiles
            )
        if self.max_error_rate is not None:
            parts.append(f"errors <= {format_share(self.max_error_rate)}")
        if self.success_only:
            parts.append("percentiles over successful requests only")
        return ", ".join(parts)

    def terms(self) -> list[SloTerm]:
        """The SLO as typed terms for words in a report (contracts.plan.SloTerm)."""
        out = [
            SloTerm(metric=c.metric, stat=c.stat, threshold=c.threshold_s) for c in self.percentiles
        ]
        if self.kind == "attainment":  # the percentile form's bounds only judge goodput
            out += [
                SloTerm(metric=t.metric, threshold=t.threshold_s, share=self.min_attainment)
                for t in self.request_thresholds
            ]
        if self.max_error_rate is not None:
            out.append(SloTerm(metric="errors", threshold=self.max_error_rate))
        return out

    @property
    def canonical(self) -> str:
        """The SLO's meaning as one string: two specs that judge every run alike have the same
        one (`ttft:p95<=2s` and `TTFT:p95 <= 2000ms`; constraints in any order; `p95.0`
        and `p95`), and `--success-only` is part of it. Thresholds are in seconds and shares
        as fractions, to 9 significant digits (so `0.1ms` and `0.0001s` agree)."""
        latency = sorted(
            f"{c.metric}:{_stat_key(c)}<={c.threshold_s:.9g}s" for c in self.percentiles
        )
        if self.min_attainment is not None:
            within = sorted(f"{t.metric}<={t.threshold_s:.9g}s" for t in self.request_thresholds)
            latency = [f"attainment>={self.min_attainment:.9g}:" + ",".join(within)]
        parts = [*latency]
        if self.max_error_rate is not None:
            parts.append(f"errors<={self.max_error_rate:.9g}")
        return ",".join(parts) + (" (success only)" if self.success_only else "")

    @property
    def constraint_names(self) -> tuple[str, ...]:
        names = [c.name for c in self.percentiles]
        if self.min_attainment is not None:
            names.append("attainment")
        if self.max_error_rate is not None:
            names.append("errors")
        return tuple(names)


def _stat_key(constraint: PercentileConstraint) -> str:
    """`p95.0` and `p95` as `p95`; mean and max as they are."""
    q = constraint.quantile
    if q is None or constraint.stat == "max":
        return constraint.stat
    return f"p{q * 100:.9g}"


def format_duration(seconds: float) -> str:
    """2.0 -> '2 s', 0.1 -> '100 ms'."""
    if seconds < 1.0:
        return f"{seconds * 1000:g} ms"
    return f"{seconds:g} s"


def format_share(share: float) -> str:
    """0.95 -> '95 %'."""
    return f"{share * 100:g} %"


def _bad(text: str, token: str, why: str) -> ConfigError:
    return ConfigError(f"SLO {text!r}: bad token {token!r}: {why}\n{GRAMMAR}")


def _parse_duration(text: str, token: str, value: str) -> float:
    seconds = duration_s(value, ("ms", "s"))
    if seconds is None:
        raise _bad(text, token, f"{value!r} is not a duration like 2s or 100ms")
    return seconds


def _parse_share(text: str, token: str, value: str) -> float:
    match = _SHARE.match(value)
    if match is None:
        raise _bad(text, token, f"{value!r} is not a share like 1% or 95%")
    share = float(match.group(1)) / 100.0
    if share > 1.0:
        raise _bad(text, token, f"{value!r} is above 100%")
    return share


def _parse_metric(text: str, token: str, metric: str) -> str:
    if metric not in METRIC_COLUMNS:
        known = " | ".join(METRIC_COLUMNS)
        hint = (
            " (pooled ITL has no per-request value; use tpot or itl_max)" if metric == "itl" else ""
        )
        raise _bad(text, token, f"unknown metric {metric!r}; known: {known}{hint}")
    return metric


def _split_bound(text: str, token: str, op: str) -> tuple[str, str]:
    if op not in token:
        other = ">=" if op == "<=" else "<="
        if other in token:
            raise _bad(text, token, f"expected {op!r} here, got {other!r}")
        if "<" in token or ">" in token:
            raise _bad(text, token, f"use {op!r} (thresholds are inclusive)")
        raise _bad(text, token, f"expected NAME{op}VALUE")
    left, _, right = token.partition(op)
    if not left or not right:
        raise _bad(text, token, f"expected NAME{op}VALUE")
    return left, right


def parse_slo(text: str, *, success_only: bool = False) -> Slo:
    """Parse an SLO spec in percentile or attainment form (see GRAMMAR).

    `success_only` takes percentiles over the successful requests alone instead of counting
    failures as misses. Raises ConfigError quoting the bad token and showing the grammar.
    """
    spec = text.strip().lower().replace(" ", "").replace("≤", "<=").replace("≥", ">=")
    if not spec:
        raise ConfigError(f"SLO is empty\n{GRAMMAR}")
    min_attainment: float | None = None
    body = spec
    if spec.startswith("attainment"):
        head, sep, body = spec.partition(":")
        if not sep or not body:
            raise _bad(text, head, "the attainment form needs ':' and per-request thresholds")
        _, share = _split_bound(text, head, ">=")
        min_attainment = _parse_share(text, head, share)
    percentiles: list[PercentileConstraint] = []
    thresholds: dict[str, float] = {}
    max_error_rate: float | None = None
    for token in body.split(","):
        if not token:
            raise _bad(text, token, "empty constraint (two commas or a trailing comma)")
        if token.startswith("errors"):
            name, value = _split_bound(text, token, "<=")
            if name != "errors":
                raise _bad(text, token, f"unknown name {name!r}")
            if max_error_rate is not None:
                raise _bad(text, token, "errors given twice")
            max_error_rate = _parse_share(text, token, value)
            continue
        if token.startswith("attainment"):
            raise _bad(text, token, "attainment>=P% must come first, followed by ':'")
        left, value = _split_bound(text, token, "<=")
        threshold_s = _parse_duration(text, token, value)
        if min_attainment is not None:
            if ":" in left:
                raise _bad(text, token, "the attainment form takes METRIC<=DURATION, no STAT")
            metric = _parse_metric(text, token, left)
            if metric in thresholds:
                raise _bad(text, token, f"{metric} given twice")
            thresholds[metric] = threshold_s
            continue
        metric_name, sep, stat = left.partition(":")
        if not sep:
            raise _bad(
                text, token, "the percentile form takes METRIC:STAT<=DURATION, e.g. ttft:p95<=2s"
            )
        metric = _parse_metric(text, token, metric_name)
        stat_match = _STAT.match(stat)
        if stat_match is None or (
            stat_match.group(1) is not None and not 0 < float(stat_match.group(1)) < 100
        ):
            raise _bad(text, token, f"unknown statistic {stat!r}; use p50 .. p99.9, mean or max")
        constraint = PercentileConstraint(metric=metric, stat=stat, threshold_s=threshold_s)
        if any(c.name == constraint.name for c in percentiles):
            raise _bad(text, token, f"{constraint.name} given twice")
        percentiles.append(constraint)
        # A metric constrained at several statistics: the loosest bound is the per-request one.
        thresholds[metric] = max(thresholds.get(metric, 0.0), threshold_s)
    if min_attainment is not None and not thresholds:
        raise _bad(text, spec, "the attainment form needs at least one METRIC<=DURATION")
    if min_attainment is None and not percentiles and max_error_rate is None:
        raise ConfigError(f"SLO {text!r} has no constraint\n{GRAMMAR}")
    return Slo(
        text=text.strip(),
        kind="attainment" if min_attainment is not None else "percentile",
        percentiles=tuple(percentiles),
        max_error_rate=max_error_rate,
        min_attainment=min_attainment,
        request_thresholds=tuple(RequestThreshold(m, t) for m, t in thresholds.items()),
        success_only=success_only,
    )


def _as_slo(value: object) -> Slo:
    if isinstance(value, Slo):
        return value
    if isinstance(value, str):
        return parse_slo(value)  # a model read from a file or the CLI: the edge
    raise ValueError(f"expected an SLO spec, e.g. 'ttft:p95<=2s', got {type(value).__name__}")


# An options model's SLO: a `Slo`, built from its text when the model is read from a file or
# the command line (ConfigError for a bad spec) and written back as that text, so a file's
# form is unchanged. `success_only` is not part of the text: a model that needs it keeps it
# in a field of its own.
SloField = Annotated[
    Slo,
    PlainValidator(_as_slo),
    PlainSerializer(lambda slo: slo.text, return_type=str),
    WithJsonSchema({"type": "string"}),
]
