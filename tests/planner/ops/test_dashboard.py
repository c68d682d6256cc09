"""The Grafana dashboard `capplan plan` writes, against Grafana 11.6's own JSON schemas, and
the plan's lines on its panels (the capacity line on the load panel)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts.ops import OpsThresholds, Threshold
from planner.ops.dashboard import dashboard
from tests.helpers.grafana_schema import dashboard_problems


def _written(planned: Any) -> tuple[dict[str, Any], OpsThresholds]:
    plan, _ = planned
    assert plan.ops is not None
    return json.loads(Path(plan.ops.dashboard).read_text()), plan.ops.thresholds


def test_the_dashboard_is_one_grafana_11_6_takes(planned: Any) -> None:
    board, _ = _written(planned)
    assert dashboard_problems(board) == []


def test_the_load_panel_draws_the_plan_s_capacity(planned: Any) -> None:
    board, t = _written(planned)
    load = board["panels"][0]
    lines = {target["expr"]: target["legendFormat"] for target in load["targets"]}
    assert lines["vector(12)"] == "planned capacity (12)"  # 3 serving x 4 req/s, by hand
    assert lines["vector(10)"] == "sized for (capacity less headroom) (10)"
    titles = [p["title"] for p in board["panels"]]
    assert titles == [
        "Fleet load against the plan", "Requests waiting per instance",
        "KV-cache usage per instance", "TTFT p95", "TPOT p95", "SLO attainment (TTFT)",
    ]  # fmt: skip
    queue = board["panels"][1]["targets"][1]
    assert queue["expr"] == f"vector({t.queue_per_instance.value:.6g})"


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (("schemaVersion",), "39", "is not of type 'integer'"),
        (("panels", 0, "gridPos", "w"), None, "is not of type 'integer'"),
        (("panels", 0, "options", "legend", "placement"), "left", "is not one of"),
        (("panels", 0, "options", "tooltip", "mode"), "all", "is not one of"),
        (("panels", 0, "thresholdLine"), 12, "'thresholdLine' was unexpected"),
        (("templating", "list", 0, "type"), "datasources", "is not one of"),
    ],
)
def test_the_check_refuses_what_grafana_refuses(
    planned: Any,
    path: tuple[Any, ...],
    value: Any,
    words: str,
) -> None:
    board, _ = _written(planned)
    node = board
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    found = dashboard_problems(board)
    assert any(words in p for p in found), found


def test_a_plan_without_attainment_or_tpot_has_fewer_panels() -> None:
    t = OpsThresholds(
        unit="users", capacity=Threshold(value=30, source="x"),
        planned_load=Threshold(value=25, source="x"),
        queue_per_instance=Threshold(value=2, source="x"),
        kv_usage=Threshold(value=0.5, source="x"), slo_quantile=0.99,
        ttft_s=Threshold(value=0.0005, source="x"),
    )  # fmt: skip
    board = dashboard(t, "t")
    assert [p["title"] for p in board["panels"]][-1] == "TTFT p99"
    assert board["panels"][0]["fieldConfig"]["defaults"]["unit"] == "short"
    assert dashboard_problems(board) == []
