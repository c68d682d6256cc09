"""The plan as Prometheus alerting rules: one group, as a plain rule file and a PrometheusRule.

Every expression reads the engines' own metric names, each family joined with `or` across
the engines capplan knows (vLLM v1 and v0, SGLang, TGI: profiles.prometheus.engines), so one
file serves whichever runs. The attainment rule counts the TTFT histogram up to the largest
vLLM bucket within the SLO bound (`le` matched both as `2.5` and as Prometheus 3 writes
whole numbers, `1`/`1.0`), so it reads vLLM only. Each alert has a `for:` window and a
`runbook` annotation naming the capplan command that re-plans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from contracts.ops import OpsThresholds, Threshold
from planner.ops.thresholds import latency_names, names
from profiles.prometheus.engines import ENGINES

RATE_WINDOW = "5m"
ATTAINMENT_WINDOW = "30m"


@dataclass(frozen=True, kw_only=True)
class Alert:
    """One alerting rule."""

    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str

    def rule(self, runbook: str) -> dict[str, Any]:
        """The rule as Prometheus writes it."""
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity, "source": "capplan"},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook": runbook,
            },
        }


def either(parts: list[str]) -> str:
    return " or ".join(parts) if len(parts) == 1 else " or ".join(f"({p})" for p in parts)


def load_expr(unit: str) -> str:
    """The fleet's load: its request rate (rps), or its requests in flight (users)."""
    if unit == "rps":
        firsts = [e.requests[0] for e in ENGINES.values()]
        uniq = list(dict.fromkeys(firsts))
        return either([f"sum(rate({n}[{RATE_WINDOW}]))" for n in uniq])
    return either([f"sum({n})" for n in names("running")])


def per_instance(family: str) -> str:
    return either([f"max by (instance) ({n})" for n in names(family)])


def quantile_expr(quantile: float, metric: str) -> str:
    inner = either(
        [f"sum by (le) (rate({n}_bucket[{RATE_WINDOW}]))" for n in latency_names(metric)]
    )
    return f"histogram_quantile({quantile:g}, {inner})"


def le_matcher(bound_s: float) -> str:
    """A regex for the `le` label of a bucket, as client libraries and Prometheus 3 write it."""
    text = f"{bound_s:g}"
    forms = [text, f"{text}.0"] if "." not in text and "e" not in text else [text]
    return "|".join(f.replace(".", "\\\\.") for f in forms)


def attainment_expr(bucket_s: float) -> str:
    name = "vllm:time_to_first_token_seconds"
    good = f'sum(rate({name}_bucket{{le=~"{le_matcher(bucket_s)}"}}[{ATTAINMENT_WINDOW}]))'
    return f"{good} / sum(rate({name}_count[{ATTAINMENT_WINDOW}]))"


def _over(
    name: str,
    quantity: str,
    line: Threshold,
    *,
    for_: str,
    severity: str,
    summary: str,
    said: str,
) -> Alert:
    """An alert on `quantity` above `line`; `said` names the quantity before its value."""
    return Alert(
        name=name, expr=f"({quantity}) > {line.value:.6g}", for_=for_, severity=severity,
        summary=summary,
        description=f"{said} {{{{ $value | humanize }}}} > {line.value:.4g}: {line.source}.",
    )  # fmt: skip


def alerts(t: OpsThresholds) -> list[Alert]:
    """The alerts of thresholds `t`, in the file's order."""
    unit = "req/s" if t.unit == "rps" else "requests in flight"
    load = load_expr(t.unit)
    out = [
        _over("CapplanLoadAbovePlan", load, t.planned_load, for_="10m", severity="warning",
              summary="The fleet's load is above what the plan was sized for (headroom in use)",
              said=f"Fleet load ({unit})"),
        _over("CapplanLoadAtCapacity", load, t.capacity, for_="5m", severity="critical",
              summary="The fleet's load is above its planned capacity: the SLO may not hold",
              said=f"Fleet load ({unit})"),
        _over("CapplanQueueAboveLimit", per_instance("waiting"), t.queue_per_instance,
              for_="5m", severity="warning",
              summary="An instance queues more requests than it did at its SLO limit",
              said="{{ $labels.instance }}: requests waiting"),
        _over("CapplanKvCacheHigh", per_instance("kv_usage"), t.kv_usage, for_="10m",
              severity="warning",
              summary="An instance's KV cache is fuller than at its SLO limit",
              said="{{ $labels.instance }}: KV-cache usage"),
    ]  # fmt: skip
    for metric, bound in (("ttft", t.ttft_s), ("tpot", t.tpot_s)):
        if bound is None:
            continue
        q = f"p{t.slo_quantile * 100:g}"
        out.append(
            Alert(
                name=f"Capplan{metric.capitalize()}{q.upper().replace('.', '_')}AboveSlo",
                expr=f"{quantile_expr(t.slo_quantile, metric)} > {bound.value:.6g}",
                for_="10m",
                severity="critical",
                summary=f"The fleet's {metric.upper()} {q} is above the SLO",
                description=f"{metric.upper()} {q} {{{{ $value | humanizeDuration }}}} > "
                f"{bound.value:g} s, {bound.source}.",
            )  # fmt: skip
        )
    if t.attainment is not None and t.ttft_bucket_s is not None:
        out.append(
            Alert(
                name="CapplanSloAttainmentLow",
                expr=f"({attainment_expr(t.ttft_bucket_s)}) < {t.attainment.value:.6g}",
                for_="15m",
                severity="critical",
                summary="Fewer requests meet the SLO's TTFT bound than its target",
                description=f"{{{{ $value | humanizePercentage }}}} of requests had a TTFT "
                f"within {t.ttft_bucket_s:g} s (vLLM's bucket at or under the bound) over "
                f"{ATTAINMENT_WINDOW}; target {t.attainment.value:g}, {t.attainment.source}.",
            )  # fmt: skip
        )
    return out


def runbook(replan: str) -> str:
    """The annotation: the command that re-plans, and where live traffic and a new limit come
    from."""
    return (
        f"Re-plan: {replan}; against live traffic: capplan review (a profile read from this "
        "Prometheus); a new limit: capplan limit."
    )


def rule_groups(group: str, replan: str, t: OpsThresholds) -> dict[str, Any]:
    """The plain rule file: one group named `group`, `replan` in every runbook."""
    book = runbook(replan)
    return {
        "groups": [
            {
                "name": group,
                "rules": [a.rule(book) for a in alerts(t)],
            }
        ]
    }


def object_name(name: str) -> str:
    """`name` as the API server takes an object's name (a DNS-1123 subdomain: lower case,
    digits, '-' and '.', starting and ending with a letter or digit, at most 253
    characters): a review's service `Chat_Bot` becomes `chat-bot`."""
    text = re.sub(r"[^a-z0-9.-]+", "-", name.lower())
    text = re.sub(r"\.?-+\.?", "-", re.sub(r"\.{2,}", ".", text))[:253].strip("-.")
    return text or "capplan"


def prometheus_rule(groups: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    """The same groups as a prometheus-operator PrometheusRule named `name` (made a valid
    object name)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": object_name(name),
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "capplan"},
        },
        "spec": groups,
    }
