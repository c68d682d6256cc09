"""`capplan compare` over limit runs searched against the engine model (two max_num_seqs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.limit import write_limit
from planner.engine import build_engine_config
from planner.limit.measured.result import build_limit_result
from planner.slo.spec import parse_slo
from planner.whatif.virtual import virtual_limit
from profiles.model import save_profile
from profiles.presets import preset_profile

SLO = "ttft:p95<=2s,tpot:p95<=100ms"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("compare")
    profile = preset_profile("chat")
    profile_path = root / "chat.json"
    save_profile(profile, profile_path)
    digest = profile.digest()
    dirs = []
    for seqs in (8, 64):
        config = build_engine_config("L40S-48GB", "llama-3.1-8b", max_num_seqs=seqs)
        found = virtual_limit(profile, config, parse_slo(SLO), level_s=30.0)
        run = root / f"seqs{seqs}"
        run.mkdir()
        write_limit(
            build_limit_result(found.search, model=f"seqs{seqs}", profile_digest=digest),
            run / "limit.json",
        )
        dirs.append(run)
    return profile_path, dirs


def test_compare_ranks_the_larger_batch_first(
    runs: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    profile, (small, large) = runs
    out = tmp_path / "compare.json"
    result = CliRunner().invoke(
        app,
        [
            "compare", str(small), str(large), "--profile", str(profile), "--gpu", "L40S-48GB",
            "--label", "8 seqs,64 seqs", "-o", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["schema"] == "capplan.compare/1"
    rows = {r["label"]: r for r in data["rows"]}
    assert rows["64 seqs"]["limit"] > 2 * rows["8 seqs"]["limit"]
    assert rows["64 seqs"]["rank"] == 1
    assert (
        rows["64 seqs"]["usd_per_million_output_tokens"]
        < rows["8 seqs"]["usd_per_million_output_tokens"]
    )
    # the planner's arithmetic: ceil(peak x 1.2 / limit) + 1 instances
    import math

    peak = data["peak_rps"]
    for r in data["rows"]:
        assert r["instances"] == math.ceil(peak * 1.2 / r["limit"] - 1e-9) + 1


def test_compare_counts_tp_x_pp_gpus_per_instance(
    runs: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """An instance served at --tp 2 --pp 2 holds four GPUs: GPUs, the month's cost and the
    cost of a million output tokens are four times one GPU's, at the same instance count."""
    profile, (small, large) = runs
    data = {}
    for extra in ((), ("--tp", "2", "--pp", "2")):
        out = tmp_path / f"compare{len(extra)}.json"
        result = CliRunner().invoke(
            app,
            ["compare", str(small), str(large), "--profile", str(profile), "--gpu", "L40S-48GB",
             "--gpu-hour-price", "2.0", "-o", str(out), *extra],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        data[len(extra)] = {r["run"]: r for r in json.loads(out.read_text())["rows"]}
    for run, one in data[0].items():
        four = data[4][run]
        assert four["instances"] == one["instances"]
        assert four["gpus"] == 4 * one["instances"]
        assert four["monthly_cost_usd"] == pytest.approx(4 * one["instances"] * 2.0 * 730.0)
        assert four["usd_per_million_output_tokens"] == pytest.approx(
            4 * one["usd_per_million_output_tokens"]
        )


def test_compare_names_each_gpu_as_the_catalog_does(
    runs: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """A GPU typed as nvidia-smi names it is shown and priced as the catalog's (as whatif
    shows its candidates); one the catalog does not hold keeps the name typed."""
    profile, (small, large) = runs
    out = tmp_path / "c.json"
    result = CliRunner().invoke(
        app,
        ["compare", str(small), str(large), "--profile", str(profile),
         "--gpu", "NVIDIA H100 80GB HBM3,Gaudi3-128GB", "--gpu-hour-price", "2.0",
         "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {r["run"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows[str(small)]["gpu"] == "H100-80GB"
    assert rows[str(large)]["gpu"] == "Gaudi3-128GB"


def test_compare_refuses_one_label_for_two_runs(
    runs: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """`--label a` for two runs named both rows "a" (a bug hunt): exit 2."""
    profile, (small, large) = runs
    args = ["compare", str(small), str(large), "--profile", str(profile), "-o"]
    result = CliRunner().invoke(app, [*args, str(tmp_path / "c.json"), "--label", "a"])
    assert result.exit_code == 2 and "--label: a names more than one run" in result.output


def test_compare_refuses_runs_of_another_profile(
    runs: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    _, (small, large) = runs
    other = tmp_path / "agent.json"
    save_profile(preset_profile("agent"), other)
    args = [
        "compare",
        str(small),
        str(large),
        "--profile",
        str(other),
        "-o",
        str(tmp_path / "c.json"),
    ]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2
    assert "not comparable" in refused.output and "Traceback" not in refused.output
    assert "give the file the run was measured with" in " ".join(refused.output.split())
    forced = CliRunner().invoke(app, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert json.loads((tmp_path / "c.json").read_text())["forced"] is True
    assert "NOT COMPARABLE" in forced.output


def test_runs_on_a_profile_built_from_a_log_are_comparable(
    runs: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """`capplan limit` records the profile's own digest; compare once checked it against the
    log's (source.digest) and refused every run measured on a profile built from a log."""
    from contracts.limit import load_limit
    from planner.whatif.compare import mismatched_runs
    from profiles.build import build_profile

    log = tmp_path / "requests.csv"
    log.write_text("t,i,o\n" + "".join(f"{i},{100 + i},{20 + i}\n" for i in range(40)))
    profile = build_profile([str(log)], columns="arrival=t,input=i,output=o")
    assert profile.source.digest and profile.source.digest != profile.digest()
    _, (small, _) = runs
    measured = load_limit(small / "limit.json").model_copy(
        update={"profile_digest": profile.digest()}
    )
    assert mismatched_runs(profile, [("run", measured)]) == []
    other = measured.model_copy(update={"profile_digest": profile.source.digest})
    assert len(mismatched_runs(profile, [("run", other)])) == 1
