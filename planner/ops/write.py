"""`capplan plan` (and `capplan review`) write the plan as operations watch it: alert rules
and a dashboard.

`write_ops` computes the thresholds (planner.ops.thresholds, reading the limit run where the
limit was measured), writes `rules.yaml` (plain Prometheus rule groups, for `promtool` and a
Prometheus `rule_files` entry), `prometheus-rule.yaml` (the same groups as a
prometheus-operator PrometheusRule) and `grafana-dashboard.json` into a folder beside the
plan, and returns the plan with their record in its `ops` field; `review_with_ops` does it
for each service of a review.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from contracts.errors import InputError
from contracts.ops import OpsFiles
from contracts.plan import Plan
from contracts.review import Review
from planner.ops.dashboard import dashboard
from planner.ops.rules import alerts, prometheus_rule, rule_groups
from planner.ops.thresholds import ops_thresholds, queue_and_kv_seen


def write_ops(
    plan: Plan, folder: Path, *, replan: str, name: str, namespace: str = "default"
) -> Plan:
    """`plan` with its `ops` record, the three files written into `folder`; `replan` is the
    command the runbooks name, `name` the rule group's and the objects' name.

    Raises ConfigError for a plan without an SLO, InputError for an unreadable limit run or
    an unwritable folder.
    """
    thresholds = ops_thresholds(plan, queue_and_kv_seen(plan.inputs.limit.source))
    name = f"capplan-{name}"
    groups = rule_groups(name, replan, thresholds)
    files = {
        folder / "rules.yaml": yaml.safe_dump(groups, sort_keys=False),
        folder / "prometheus-rule.yaml": yaml.safe_dump(
            prometheus_rule(groups, name, namespace), sort_keys=False
        ),
        folder / "grafana-dashboard.json": json.dumps(
            dashboard(thresholds, name.replace("-", ": ", 1)), indent=2
        )
        + "\n",
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, text in files.items():
            path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise InputError(f"{folder}: cannot write the alert rules and dashboard ({err})") from err
    record = OpsFiles(
        prometheus_rule=str(folder / "prometheus-rule.yaml"),
        rule_groups=str(folder / "rules.yaml"),
        dashboard=str(folder / "grafana-dashboard.json"),
        alerts=[a.name for a in alerts(thresholds)],
        thresholds=thresholds,
    )
    return plan.model_copy(update={"ops": record})


def review_with_ops(
    review: Review, replan: str, folder: Path, namespace: str = "default"
) -> Review:
    """`review` with each service's rules and dashboard in `folder`/SERVICE (services whose
    plan has an SLO), `replan` (the review's own command) in every runbook."""
    services = []
    for service in review.services:
        if service.plan.inputs.slo is not None:
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", service.name)
            plan = write_ops(
                service.plan, folder / safe, replan=replan, name=safe, namespace=namespace
            )
            service = service.model_copy(update={"plan": plan})
        services.append(service)
    return review.model_copy(update={"services": services})
