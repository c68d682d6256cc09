"""What `capplan review` was asked: each option's choices and default declared once here.

The CLI builds `ReviewOptions` with `capplan.cli.build_options` (a refused value is one
`error:` line naming the option, exit 2). It sits with the review's PDF, the last layer the
options reach: --lang is this layer's `Lang`; the planner's review gets the rest.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from contracts.executor import LOCAL, ExecutorSpec
from reports.i18n import Lang


class ReviewOptions(BaseModel):
    """The review file, the PDF and review.json to write, the language, the previous review
    and where the plans' fleet simulations run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    review_file: Path = Field(description="the review file (YAML)")
    output: Path = Field(description="the PDF to write")
    lang: Lang = Field(default="en", description="the PDF's language")
    previous: Path | None = Field(default=None, description="last quarter's review.json")
    json_out: Path | None = Field(default=None, description="None: review.json by the PDF")
    executor: ExecutorSpec = Field(default=LOCAL, description="where fleet simulations run")

    @property
    def name(self) -> str:
        """The review's name: the PDF's stem."""
        return self.output.stem

    @property
    def json_path(self) -> Path:
        """Where review.json goes."""
        return self.json_out or self.output.with_suffix(".json")

    @property
    def ops_dir(self) -> Path:
        """Where the services' alert rules and dashboards go, beside the PDF."""
        return self.output.with_name(self.output.stem + "-ops")
