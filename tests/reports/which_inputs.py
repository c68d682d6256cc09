"""The "Which configuration" inputs, written by the real commands on the report fixture's
profile: a whatif of 2 GPUs x prefix caching in 10-virtual-second levels, a compare of the
fixture's measured H100 run with an L40S limit searched against the engine model (which says
it is predicted, with its interval), and a
compare forced over a run measured under another SLO. A few seconds; the package's tests
share one set (conftest.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from capplan.cli import app
from contracts.limit import LimitResult, write_limit
from planner.engine import build_engine_config
from planner.limit.measured.result import build_limit_result
from planner.slo.spec import parse_slo
from planner.whatif.interval import limit_interval
from planner.whatif.virtual import virtual_limit
from profiles.model import load_profile
from testkit.report_inputs import FixturePaths, write_fixture

SLO = "ttft:p95<=2s"  # the fixture's limit was searched under it
PEAK_RPS = "42"  # the fixture plan's peak


@dataclass(frozen=True)
class Inputs:
    """The report fixture and the three "Which configuration" inputs written from it."""

    paths: FixturePaths
    whatif: Path
    compare: Path
    forced: Path
    whatif_output: str  # what `capplan whatif` printed


def run_cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


def build_inputs(root: Path) -> Inputs:
    """The whatif.json, compare.json and forced compare.json of the report fixture in `root`."""
    paths = write_fixture(root)
    whatif = root / "whatif.json"
    whatif_output = run_cli(
        "whatif", "--profile", str(paths.profile), "--slo", SLO, "--gpu", "H100-80GB,L40S-48GB",
        "--vary", "prefix_caching", "--level-duration", "10", "--peak-rps", PEAK_RPS,
        "-o", str(whatif),
    )  # fmt: skip
    profile = load_profile(paths.profile)
    found = virtual_limit(
        profile, build_engine_config("L40S-48GB", "llama-3.1-8b"), parse_slo(SLO), level_s=10.0
    )
    l40s = root / "runs" / "l40s"
    l40s.mkdir()
    digest = profile.digest()
    # the engine model's limit, not a GPU's: it says so, with its interval (as the demo's)
    modelled = build_limit_result(found.search, model="llama-3.1-8b", profile_digest=digest)
    assert modelled.feasible_max is not None
    interval = limit_interval(modelled.feasible_max, "vllm", "L40S-48GB").contract()
    write_limit(modelled.model_copy(update={"predicted": interval}), l40s / "limit.json")
    compare = root / "compare.json"
    runs = (str(paths.run_dir), str(l40s))
    run_cli(
        "compare", *runs, "--profile", str(paths.profile), "--gpu", "H100-80GB,L40S-48GB",
        "--label", "measured H100,modelled L40S", "--peak-rps", PEAK_RPS, "-o", str(compare),
    )  # fmt: skip
    # a run measured under another SLO: compare refuses it unless forced
    other = root / "runs" / "other-slo"
    other.mkdir()
    measured = LimitResult.model_validate_json((paths.run_dir / "limit.json").read_text())
    write_limit(measured.model_copy(update={"slo": "ttft:p95<=3s"}), other / "limit.json")
    forced = root / "forced.json"
    run_cli(
        "compare", *runs, str(other), "--profile", str(paths.profile),
        "--gpu", "H100-80GB,L40S-48GB,H100-80GB", "--peak-rps", PEAK_RPS, "--force",
        "-o", str(forced),
    )  # fmt: skip
    return Inputs(paths, whatif, compare, forced, whatif_output)
