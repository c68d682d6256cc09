"""What `capplan report` was asked: each option's choices and default declared once here.

The CLI builds `ReportOptions` with `capplan.cli.build_options` (a refused value is one
`error:` line naming the option, exit 2); `render` hands the renderer its inputs, as a
capacity baseline or as the "Which configuration" section alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.errors import ConfigError
from reports.i18n import Lang


class ReportOptions(BaseModel):
    """The report's inputs (files), its PDF, language and CJK font."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: Path | None = Field(default=None, description="profile JSON (capplan profile)")
    run: Path | None = Field(
        default=None, description="run directory (loadtest / limit); None: a limit given"
    )
    plan: Path | None = Field(default=None, description="plan.json of capplan plan")
    output: Path = Field(description="the PDF to write")
    previous: Path | None = Field(default=None, description="previous plan, for page 1's table")
    limit: Path | None = Field(default=None, description="limit.json not in the run directory")
    lang: Lang = Field(default="en", description="the report's language")
    cjk_font: Path | None = Field(
        default=None, description="None: CAPPLAN_CJK_FONT, fontconfig, shipped (reports.fonts)"
    )
    whatif: Path | None = Field(default=None, description="whatif.json: 'Which configuration'")
    compare: Path | None = Field(default=None, description="compare.json: the same section")
    verify: list[Path] = Field(
        default_factory=list, description="verify.json of this plan (N, N-K): fleet page"
    )

    @model_validator(mode="after")
    def _a_baseline_or_the_section(self) -> ReportOptions:
        if self.which_only:
            return self
        if self.profile is None or self.plan is None:
            missing = [n for n in ("--profile", "--plan") if n not in self._given()]
            raise ConfigError(
                f"missing {', '.join(missing)}: a capacity baseline needs --profile and --plan "
                "(and --run, the load test that measured the plan's limit, unless the plan was "
                "given its limit as a number); for the 'Which configuration' section alone give "
                "only --whatif and/or --compare"
            )
        if self.run is None and self.limit is not None:
            raise ConfigError("--limit reads a limit.json beside a load test: give its --run")
        return self

    def _given(self) -> list[str]:
        pairs = (("--profile", self.profile), ("--run", self.run), ("--plan", self.plan))
        return [name for name, value in pairs if value]

    @property
    def which_only(self) -> bool:
        """No --profile, --run or --plan but a whatif.json or compare.json: that section alone."""
        return not self._given() and (self.whatif is not None or self.compare is not None)

    def render(self, warn: Callable[[str], None]) -> Path:
        """Write the PDF (`warn` hears what still lets it render) and return its path."""
        from reports import render_report, render_which_report

        if self.which_only:
            return render_which_report(
                self.output, whatif=self.whatif, compare=self.compare, lang=self.lang,
                cjk_font=self.cjk_font, warn=warn,
            )  # fmt: skip
        assert self.profile is not None and self.plan is not None
        return render_report(
            self.profile, self.run, self.plan, self.output, previous_plan=self.previous,
            lang=self.lang, limit_path=self.limit, cjk_font=self.cjk_font, warn=warn,
            whatif=self.whatif, compare=self.compare, verify=self.verify,
        )  # fmt: skip
