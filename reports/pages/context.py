"""What every page of the capacity baseline reads: the loaded inputs in one language, and the
few sentences more than one page shows (the answer, the fleet warning, the profile's digests).
"""

from __future__ import annotations

from datetime import datetime

from contracts.limit import LimitResult
from contracts.run import RunInfo, StageSummary
from reports.data import ReportInputs
from reports.i18n import Words
from reports.i18n.slo_words import slo_stated
from reports.layout import Layout


class ReportContext(Layout):
    """One report's inputs, words and styles; the pages (reports/pages/*.py) are functions of it."""

    def __init__(self, inputs: ReportInputs, words: Words, generated_at: datetime) -> None:
        super().__init__(words)
        self.inputs = inputs
        self.date = generated_at.strftime("%Y-%m-%d %H:%M UTC")
        self.plan = inputs.plan
        self.first_scenario = inputs.plan.scenarios[0] if inputs.plan.scenarios else None
        self.unit = (
            self.first_scenario.unit if self.first_scenario else inputs.plan.inputs.limit.unit
        )

    @property
    def measured(self) -> bool:
        """A load test (run and limit.json) was given; without one (a limit given to the
        planner as a number) the load-test and limit pages are left out."""
        return self.inputs.run is not None and self.inputs.limit is not None

    @property
    def run(self) -> RunInfo:
        """run.json of the load test; only the pages shown when `measured` read it."""
        assert self.inputs.run is not None
        return self.inputs.run

    @property
    def limit(self) -> LimitResult:
        """limit.json of the load test; only the pages shown when `measured` read it."""
        assert self.inputs.limit is not None
        return self.inputs.limit

    def slo(self) -> str:
        measured = self.inputs.limit.slo if self.inputs.limit is not None else ""
        return self.plan.inputs.slo or self.plan.inputs.limit.slo or measured

    def slo_stated(self) -> str:
        """The SLO's grammar with its words beside it: "ttft:p95<=2s (95 % of requests see
        the first token within 2 s)"; the grammar alone for a plan without SLO terms."""
        return slo_stated(self.words, self.slo(), self.plan.inputs.slo_terms)

    def stage(self, role: str) -> StageSummary | None:
        return next((s for s in self.inputs.stages if s.role == role), None)

    def role(self, role: str) -> str:
        return self.t(f"role_{role}")

    def limit_value(self) -> str:
        return self.words.load(self.plan.inputs.limit.value, self.plan.inputs.limit.unit)

    def peak_definition(self) -> str:
        inputs = self.plan.inputs
        if inputs.peak_rps_given is not None or inputs.peak_users_given is not None:
            return self.t("peak_def_given")
        return self.t(
            "peak_def_quantile", q=f"{inputs.peak_quantile * 100:g}", window=inputs.peak_window
        )

    def gpu_label(self) -> str:
        res = self.plan.resources
        return res.gpu if res.tp == 1 else f"{res.tp}× {res.gpu}"

    def answer_sentence(self) -> str:
        plan = self.plan
        first = self.first_scenario
        peak = first.demand if first else plan.demand.peak_rps
        key = "answer_rate" if self.unit == "rps" else "answer_users"
        return self.t(
            key,
            peak=self.words.rate(peak) if self.unit == "rps" else self.words.num(peak),
            peak_def=self.peak_definition(),
            slo=self.slo_stated(),
            n=plan.instances,
            gpu=self.gpu_label(),
            load=first.instances_for_load if first else plan.instances,
            spare=first.redundancy if first else plan.inputs.redundancy,
            cost=self.words.usd(plan.cost.monthly_usd),
        )

    def fleet_warning(self) -> str | None:
        """A sentence when the fleet simulation does not confirm the planned count."""
        fleet = self.plan.checks.fleet
        if fleet is None or self.first_scenario is None:
            return None
        n = self.first_scenario.instances_for_load
        at_n = [p for p in fleet.points if p.instances == n]
        if at_n and not any(p.meets_slo for p in at_n):
            return self.t("fleet_warning", n=n)
        return None

    def profile_digests(self) -> set[str]:
        """Digests that identify the given profile: its JSON's and its source's."""
        return {
            d
            for d in (
                self.inputs.profile.digest(),
                self.inputs.profile.source.digest,
                next((x.sha256 for x in self.inputs.digests if x.role == "profile"), ""),
            )
            if d
        }
