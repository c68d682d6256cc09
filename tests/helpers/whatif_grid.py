"""whatif's small candidate grid that the executor tests run on each executor."""

from __future__ import annotations

from contracts.executor import LOCAL, ExecutorSpec
from contracts.whatif import WhatifCandidate
from planner.slo.spec import parse_slo
from planner.whatif.knobs import parse_vary
from planner.whatif.options import WhatifOptions
from planner.whatif.run import run_whatif
from profiles.presets import preset_profile

# Two shapes x two knob values (CAPPLAN_FLEET_WORKERS sets the workers whatever the size).
GPUS = ("H100-80GB", "A100-80GB")
VARY = "max_num_seqs=256:64"


def grid_candidates(executor: ExecutorSpec = LOCAL) -> list[dict[str, object]]:
    """The grid's candidates as dicts, less their wall time (the machine's, not a result)."""
    options = WhatifOptions(
        profile_path="chat", slo=parse_slo("ttft:p95<=2s"), gpus=GPUS, vary=parse_vary(VARY),
        level_s=10.0, executor=executor,
    )  # fmt: skip
    whatif = run_whatif(preset_profile("chat", rate_rps=20.0), options)
    return [_result(c) for c in whatif.candidates]


def _result(c: WhatifCandidate) -> dict[str, object]:
    return c.model_dump(exclude={"wall_s"})
