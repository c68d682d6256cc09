"""The risks of each service of a review, and their ranking across services.

Each rule reads numbers already computed (the plan, the count interval, the trend) and says
in words what could make the count wrong; the thresholds are stated here so they can be
argued with.
"""

from __future__ import annotations

from contracts.finding import Finding, FindingValue
from contracts.review import Risk, RiskLevel, ServiceReview
from planner.capacity.arithmetic import Limit
from profiles.model import Profile

KV_WATCH_HEADROOM = 0.2  # less than 20 % KV cache headroom at the limit: medium; below 0: high
BURST_WATCH = 1.5  # 10 s peak over the planning peak above this: medium
LEVEL_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


def service_risks(s: ServiceReview, profile: Profile, limit: Limit) -> list[Risk]:
    """Risks of one service, the most serious first."""
    out: list[tuple[RiskLevel, str, Finding]] = []
    plan = s.plan
    iv = s.count_interval
    if iv is not None and iv.high > s.instances:
        out.append(
            (
                "high" if iv.high - s.instances >= 2 else "medium",
                "count_interval",
                Finding(
                    key="risk.count_interval",
                    values={
                        "level": iv.level,
                        "low": iv.low,
                        "high": iv.high,
                        "dominant": iv.dominant,
                    },
                ),
            )
        )
    if s.trend is not None and s.growth_source == "given" and s.trend.growth > s.growth:
        out.append(
            (
                "high" if s.trend.growth_low > s.growth else "medium",
                "growth",
                Finding(
                    key="risk.growth",
                    values={
                        "growth": s.trend.growth,
                        "horizon": s.trend.horizon,
                        "assumed": s.growth,
                    },
                ),
            )
        )
    observed = s.observed
    if observed is not None and observed.contradicts_limit:
        figures: dict[str, FindingValue] = {
            "missed": observed.missed_min_rps,
            "minutes": observed.window_s / 60,
            "limit_rps": s.per_instance_limit,
        }
        risk = Finding(key="risk.observed_capacity", values=figures)
        out.append(("high", "observed_capacity", risk))
    kv = plan.resources.gpu_memory.kv_headroom_frac
    if kv < KV_WATCH_HEADROOM:
        out.append(
            (
                "high" if kv < 0 else "medium",
                "kv_headroom",
                Finding(key="risk.kv_headroom", values={"kv": kv, "gpu": s.gpu, "tp": s.tp}),
            )
        )
    fleet = plan.checks.fleet
    if fleet is not None and not any(
        p.meets_slo for p in fleet.points if p.instances == s.instances
    ):
        verdict = fleet.verdict_finding or Finding(
            key="risk.fleet_check", values={"verdict": fleet.verdict}
        )
        out.append(("high", "fleet_check", verdict))
    burst = plan.demand.burst_factor
    if burst is not None and burst > BURST_WATCH:
        out.append(
            (
                "medium",
                "bursts",
                Finding(
                    key="risk.bursts", values={"burst": burst, "headroom": plan.inputs.headroom}
                ),
            )
        )
    if limit.result is None:
        out.append(
            ("medium", "limit_given", Finding(key="risk.limit_given", values={"limit": s.limit}))
        )
    if profile.source.format == "preset":
        out.append(("low", "preset", Finding(key="risk.preset")))
    out.sort(key=lambda r: LEVEL_ORDER[r[0]])
    return [
        Risk(
            service=s.name,
            level=lv,
            kind=k,
            text=_risk_text(f),
            finding=f,
            monthly_cost_usd=s.monthly_cost_usd,
        )
        for lv, k, f in out
    ]


def _risk_text(finding: Finding) -> str:
    """The risk in English; the fleet simulation's own verdict reads after its name."""
    if finding.key.startswith("fleet."):
        return f"fleet simulation: {finding.english()}"
    return finding.english()


def rank_risks(risks: list[Risk]) -> list[Risk]:
    """Across services: by level, then by the service's monthly cost (what is at stake)."""
    return sorted(risks, key=lambda r: (LEVEL_ORDER[r.level], -r.monthly_cost_usd, r.service))
