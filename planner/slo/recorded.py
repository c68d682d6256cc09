"""The SLO a stored file recorded (plan.json, limit.json, a search ledger), parsed once where
the file is read: the file readers' edge, as the CLI's options are the command line's.

Files keep the SLO as the text the user gave (contracts may not import planner); everything
below the reader passes the parsed `Slo`. Raises ConfigError for a recorded spec that does not
parse.
"""

from __future__ import annotations

from contracts.limit import LimitResult
from contracts.plan import Plan
from contracts.searchlog import SearchIdentity
from planner.slo.spec import Slo, parse_slo


def plan_slo(plan: Plan) -> Slo | None:
    """The SLO `plan` was planned under (inputs.slo), or None when it holds none."""
    text = plan.inputs.slo
    return None if text is None else parse_slo(text)


def limit_slo(result: LimitResult) -> Slo:
    """The SLO the limit in `result` was measured (or predicted) under."""
    return parse_slo(result.slo)


def ledger_slo(identity: SearchIdentity) -> Slo:
    """The SLO of a recorded search (search.json), with its success-only choice."""
    return parse_slo(identity.slo, success_only=identity.success_only)


def normalise_slo(spec: str) -> str:
    """The meaning of a recorded SLO spec (planner.slo.spec.Slo.canonical), so `ttft:p95<=2s`
    and `TTFT:p95 <= 2000ms`, or one SLO's constraints in another order, compare equal."""
    return parse_slo(spec).canonical
