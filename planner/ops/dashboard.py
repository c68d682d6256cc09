"""The plan as a Grafana dashboard: the quantities the alerts watch, each beside its line.

Six time series panels over one Prometheus data source variable: the fleet's load with the
plan's capacity and the load it was sized for drawn as lines (constant queries, so they read
as series and carry their numbers in the legend), the queue and KV-cache usage per instance
with the limit's lines, the TTFT and TPOT quantile with the SLO bounds, and the attainment
with its target. The queries are the alert rules' own (planner.ops.rules). Written for
Grafana 11.6's dashboard JSON model (schemaVersion 39); the tests validate it against that
version's published JSON schema.
"""

from __future__ import annotations

from typing import Any

from contracts.ops import OpsThresholds
from planner.ops.rules import attainment_expr, load_expr, per_instance, quantile_expr

SCHEMA_VERSION = 39  # Grafana 11.x dashboards
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _target(ref: str, expr: str, legend: str) -> dict[str, Any]:
    return {"refId": ref, "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}


def _panel(
    panel_id: int, title: str, unit: str, targets: list[dict[str, Any]], description: str
) -> dict[str, Any]:
    return {
        "type": "timeseries",
        "id": panel_id,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {
            "h": 8,
            "w": 12,
            "x": 12 * ((panel_id - 1) % 2),
            "y": 8 * ((panel_id - 1) // 2),
        },
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {
            "legend": {
                "showLegend": True,
                "displayMode": "list",
                "placement": "bottom",
                "calcs": [],
            },
            "tooltip": {"mode": "multi", "sort": "none"},
        },
    }


def _line(ref: str, value: float, legend: str) -> dict[str, Any]:
    return _target(ref, f"vector({value:.6g})", f"{legend} ({value:.4g})")


def dashboard(t: OpsThresholds, title: str) -> dict[str, Any]:
    """The dashboard of thresholds `t`."""
    load_unit = "reqps" if t.unit == "rps" else "short"
    q = f"p{t.slo_quantile * 100:g}"
    panels = [
        _panel(1, "Fleet load against the plan", load_unit, [
            _target("A", load_expr(t.unit), "fleet load"),
            _line("B", t.capacity.value, "planned capacity"),
            _line("C", t.planned_load.value, "sized for (capacity less headroom)"),
        ], f"Capacity: {t.capacity.source}. Sized for: {t.planned_load.source}."),
        _panel(2, "Requests waiting per instance", "short", [
            _target("A", per_instance("waiting"), "{{instance}}"),
            _line("B", t.queue_per_instance.value, "at the limit"),
        ], t.queue_per_instance.source),
        _panel(3, "KV-cache usage per instance", "percentunit", [
            _target("A", per_instance("kv_usage"), "{{instance}}"),
            _line("B", t.kv_usage.value, "at the limit"),
        ], t.kv_usage.source),
    ]  # fmt: skip
    for metric, bound in (("ttft", t.ttft_s), ("tpot", t.tpot_s)):
        if bound is not None:
            panels.append(
                _panel(
                    len(panels) + 1,
                    f"{metric.upper()} {q}",
                    "s",
                    [
                        _target("A", quantile_expr(t.slo_quantile, metric), f"{metric} {q}"),
                        _line("B", bound.value, "SLO"),
                    ],
                    bound.source,
                )  # fmt: skip
            )
    if t.attainment is not None and t.ttft_bucket_s is not None:
        panels.append(
            _panel(
                len(panels) + 1,
                "SLO attainment (TTFT)",
                "percentunit",
                [
                    _target("A", attainment_expr(t.ttft_bucket_s), "within the TTFT bound"),
                    _line("B", t.attainment.value, "target"),
                ],
                t.attainment.source,
            )  # fmt: skip
        )
    return {
        "title": title,
        "uid": _uid(title),
        "tags": ["capplan"],
        "timezone": "utc",
        "editable": True,
        "schemaVersion": SCHEMA_VERSION,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "panels": panels,
        "templating": {
            "list": [
                {
                    "type": "datasource",
                    "name": "datasource",
                    "label": "Prometheus",
                    "query": "prometheus",
                },
            ]
        },  # fmt: skip
        "annotations": {"list": []},
    }


def _uid(title: str) -> str:
    """A stable uid of at most 40 characters from the title."""
    import hashlib

    return "capplan-" + hashlib.sha256(title.encode()).hexdigest()[:16]


def _grid(panel_id: int) -> dict[str, int]:
    """Two panels a row, 12 columns by 8 rows each."""
    return {"h": 8, "w": 12, "x": 12 * ((panel_id - 1) % 2), "y": 8 * ((panel_id - 1) // 2)}
