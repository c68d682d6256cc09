"""The rows of the report's errors-by-class table, read from stages.json and limit.json.

Nothing is counted here: the counts per class and the most frequent message per class were
stored by the load test (`StageSummary.errors_by_class`, `error_messages`) and the limit
search (`LimitLevel.errors_by_class`).
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.limit import LimitResult
from contracts.run import StageSummary


@dataclass(frozen=True)
class ErrorRow:
    """One class of failures in one stage or limit level."""

    where: str  # a stage name, or "" with `load` set for a limit level
    load: float | None
    error_class: str
    requests: int
    message: str


def error_rows(stages: list[StageSummary], limit: LimitResult) -> list[ErrorRow]:
    """Every (stage or level, class) with failures: stages in run order, then limit levels
    by load; classes by count, most first."""
    rows: list[ErrorRow] = []
    for st in stages:
        for cls, n in sorted(st.errors_by_class.items(), key=lambda kv: (-kv[1], kv[0])):
            rows.append(ErrorRow(st.name, None, cls, n, st.error_messages.get(cls, "")))
    messages = {st.name: st.error_messages for st in stages}
    for lv in sorted(limit.levels, key=lambda lv: lv.load):
        # a level's message: its last measurement's stage, when that stage is in this run
        said = messages.get(lv.stage, {})
        for cls, n in sorted(lv.errors_by_class.items(), key=lambda kv: (-kv[1], kv[0])):
            rows.append(ErrorRow("", lv.load, cls, n, said.get(cls, "")))
    return rows
