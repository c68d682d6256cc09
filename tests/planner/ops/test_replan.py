"""The runbook's re-plan command, run as written, makes the same plan: every input that changes
the plan is carried, each value quoted for the shell (a folder with a space in its name)."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from capplan.cli import app
from contracts.plan import Plan
from profiles.model import save_profile
from profiles.presets import preset_profile

SUFFIX = "; against live traffic: capplan review"


def _replan_words(rules: Path) -> list[str]:
    """The re-plan command of every rule in `rules` (all the same), split as a shell would."""
    books = {
        rule["annotations"]["runbook"]
        for group in yaml.safe_load(rules.read_text())["groups"]
        for rule in group["rules"]
    }
    assert len(books) == 1, books
    command = books.pop().removeprefix("Re-plan: ")
    return shlex.split(command[: command.rindex(SUFFIX)])


def _plan(args: list[str]) -> Plan:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return Plan.model_validate_json(Path(args[args.index("-o") + 1]).read_text())


def test_runbook_command_remakes_the_plan(tmp_path: Path) -> None:
    folder = tmp_path / "my plans"
    folder.mkdir()
    profile = folder / "chat's day.json"
    save_profile(preset_profile("chat", rate_rps=5.0), profile)
    out = folder / "l40s.json"
    first = _plan(
        ["plan", "--profile", str(profile), "--limit", "6users", "--slo", "ttft:p95<=2s",
         "--peak-users", "37", "--gpu", "L40S-48GB", "--tp", "2", "--kv-cache-dtype", "fp8",
         "--growth", "1.0,2.0", "--headroom", "0.3", "--redundancy", "2",
         "--gpu-hour-price", "1.5", "--cpu-cores-per-gpu", "6", "--seed", "7",
         "--no-fleet-check", "-o", str(out)]
    )  # fmt: skip
    words = _replan_words(folder / "l40s-ops" / "rules.yaml")
    assert words[:2] == ["capplan", "plan"] and words[words.index("-o") + 1] == str(out)
    again_path = tmp_path / "again.json"
    words[words.index("-o") + 1] = str(again_path)
    again = _plan(words[1:])
    assert (again.instances, again.resources.gpu, again.resources.gpus) == (
        first.instances, "L40S-48GB", first.resources.gpus
    )  # fmt: skip
    assert again.cost.monthly_usd == first.cost.monthly_usd
    assert [s.instances for s in again.scenarios] == [s.instances for s in first.scenarios]
    assert again.inputs == first.inputs


def test_runbook_command_leaves_out_only_defaults(tmp_path: Path) -> None:
    out = tmp_path / "plain.json"
    profile = tmp_path / "chat.json"
    save_profile(preset_profile("chat", rate_rps=5.0), profile)
    first = _plan(["plan", "--profile", str(profile), "--limit", "4rps", "--slo", "ttft:p95<=2s",
                   "--no-fleet-check", "-o", str(out)])  # fmt: skip
    words = _replan_words(tmp_path / "plain-ops" / "rules.yaml")
    for absent in ("--gpu-hour-price", "--tp", "--growth", "--seed", "--peak-rps"):
        assert absent not in words  # defaults and a table price stay out
    words[words.index("-o") + 1] = str(tmp_path / "again.json")
    assert _plan(words[1:]).inputs == first.inputs
