"""What `capplan loadtest` was asked: each option's bound and default declared once here.

The CLI builds `LoadTestOptions` with `capplan.cli.build_options` (a refused value is one
`error:` line naming the option, exit 2); `load_test_config` hands the load layer its typed
slice, a `LoadTestConfig`. The `vllm bench serve` spellings (--dataset-name, ...) are
`capplan.commands.vbench`'s, checked there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.loadtest.run import LoadTestConfig
from planner.slo.spec import SloField


class LoadTestOptions(BaseModel):
    """One load test: the target, the traffic, the stage plan's load and the run's limits."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    host: str = Field(description="base URL of the OpenAI-compatible target")
    model: str | None = Field(
        default=None, description="model name sent; None: the first the target lists"
    )
    out_dir: Path = Field(description="run folder to write")
    profile_path: str | None = Field(default=None, description="None: the chat preset")
    stage_plan: str | None = Field(
        default=None, description="a built-in plan's name or a YAML/JSON plan file"
    )
    rate: float | None = Field(default=None, gt=0, description="open-loop rate, req/s")
    users: int | None = Field(default=None, ge=1, description="closed-loop users")
    arrival: str = Field(default="poisson", description="poisson, constant or gamma:K")
    duration_s: float | None = Field(default=None, gt=0, description="stage length")
    replay_path: str | None = Field(default=None, description="log whose arrivals are replayed")
    replay_speed: float = Field(default=1.0, gt=0)
    endpoint: Literal["chat", "completions"] = "chat"
    workers: int | None = Field(default=0, ge=0, description="0: one process; None: auto")
    master_bind: str | None = None
    expect_workers: int = Field(default=0, ge=0)
    api_key_env: str | None = None
    seed: int = 0
    max_concurrency: int | None = Field(default=None, ge=1)
    ignore_eos: bool = True
    slo_ttft_s: float | None = Field(default=None, gt=0, description="recovery threshold")
    slo: SloField | None = Field(default=None, description="each stage judged under it")
    request_timeout_s: float = Field(default=300.0, gt=0)
    scrape_metrics: bool = True
    time_scale: float = Field(default=1.0, gt=0)
    max_error_share: float | None = Field(
        default=None, ge=0, le=1, description="exit 3 above it; None: only when none succeeded"
    )
    preflight: bool = True

    def load_test_config(self) -> LoadTestConfig:
        """The load layer's slice (`--workers auto` as 0 until the plan's peak sets it)."""
        return LoadTestConfig(
            host=self.host,
            model=self.model or "",
            endpoint=self.endpoint,
            profile_path=self.profile_path,
            api_key_env=self.api_key_env,
            seed=self.seed,
            workers=self.workers or 0,
            ignore_eos=self.ignore_eos,
            request_timeout_s=self.request_timeout_s,
            max_concurrency=self.max_concurrency,
            scrape_metrics=self.scrape_metrics,
            slo_ttft_s=self.slo_ttft_s,
            slo=self.slo,
            replay_path=self.replay_path,
            replay_speed=self.replay_speed,
            time_scale=self.time_scale,
            master_bind=self.master_bind,
            expect_workers=self.expect_workers,
        )
