"""`capplan verify`'s bad input: a clear error naming what is wrong, exit code 2, no load."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from profiles.model import save_profile
from testkit.profiles import make_profile

runner = CliRunner()


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("verify")
    profile = folder / "profile.json"
    save_profile(make_profile(rate_rps=3.0), profile)
    plan = folder / "plan.json"
    result = runner.invoke(
        app,
        ["plan", "--profile", str(profile), "--limit", "4rps", "--peak-rps", "9",
         "--slo", "ttft:p95<=2s", "--headroom", "0", "--redundancy", "0",
         "--no-fleet-check", "-o", str(plan)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return plan, profile


def _verify(planned: tuple[Path, Path], tmp_path: Path, *args: str) -> tuple[int, str]:
    plan, profile = planned
    argv = ["verify", "--plan", str(plan), "--profile", str(profile), "-o", str(tmp_path / "v")]
    result = runner.invoke(app, [*argv, *args])
    return result.exit_code, result.output


def test_a_profile_the_plan_was_not_made_on_is_refused(
    planned: tuple[Path, Path], tmp_path: Path
) -> None:
    other = tmp_path / "other.json"
    save_profile(make_profile(rate_rps=5.0), other)
    result = runner.invoke(
        app,
        ["verify", "--plan", str(planned[0]), "--profile", str(other), "--host",
         "http://127.0.0.1:9", "-o", str(tmp_path / "v")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "is not the profile" in result.output and "profile_digest" in result.output


def test_a_duplicate_instance_and_a_wrong_count_are_refused(
    planned: tuple[Path, Path], tmp_path: Path
) -> None:
    code, out = _verify(planned, tmp_path, "--hosts", "http://127.0.0.1:1,http://127.0.0.1:1/")
    assert code == 2 and "http://127.0.0.1:1 is listed twice" in out
    code, out = _verify(planned, tmp_path, "--hosts", "http://127.0.0.1:1,http://127.0.0.1:2")
    assert code == 2 and "lists 2 instance(s); the plan has 3" in out
    code, out = _verify(planned, tmp_path, "--host", "http://127.0.0.1:1", "--instances-down", "3")
    assert code == 2 and "at least one must serve" in out
    code, out = _verify(planned, tmp_path)
    assert code == 2 and "either --host" in out


def test_a_master_bind_capplans_router_cannot_listen_on_is_refused(
    planned: tuple[Path, Path], tmp_path: Path
) -> None:
    """With --hosts the remote workers send to capplan's router, which listens on
    --master-bind's address: a wildcard or a malformed one exits 2 before any load."""
    hosts = "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3"
    remote = ("--expect-workers", "2", "--hosts", hosts)
    code, out = _verify(planned, tmp_path, "--master-bind", "0.0.0.0:5557", *remote)
    assert code == 2 and "--master-bind 0.0.0.0:5557 with --hosts" in out, out
    assert "not a wildcard" in " ".join(out.split())
    code, out = _verify(planned, tmp_path, "--master-bind", "10.0.0.5", *remote)
    assert code == 2 and "--master-bind '10.0.0.5': expected HOST:PORT" in out, out


def test_an_unreachable_balancer_is_refused(planned: tuple[Path, Path], tmp_path: Path) -> None:
    code, out = _verify(planned, tmp_path, "--host", "http://127.0.0.1:9")
    assert code == 2, out
    assert "http://127.0.0.1:9: the target does not answer" in out
    assert not (tmp_path / "v" / "verify.json").exists()


class _Only502(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        body = b'{"error": {"message": "no live upstreams"}}'
        self.send_response(502)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def only_5xx() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Only502)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_balancer_answering_only_5xx_is_refused(
    planned: tuple[Path, Path], tmp_path: Path, only_5xx: str
) -> None:
    code, out = _verify(planned, tmp_path, "--host", only_5xx, "--model", "m")
    assert code == 2, out
    assert "HTTP 502" in out and "no live upstreams" in out


@pytest.fixture(scope="module")
def planned_from_a_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The user's path: a request log -> `capplan profile` -> `capplan plan` (the profile then
    carries the log's digest in source.digest beside its own)."""
    folder = tmp_path_factory.mktemp("verify-log")
    log = folder / "requests.csv"
    rows = [f"{0.4 * i:.3f},{200 + 37 * i % 600},{40 + 11 * i % 120}" for i in range(300)]
    log.write_text("timestamp,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    profile = folder / "profile.json"
    result = runner.invoke(app, ["profile", str(log), "-o", str(profile)])
    assert result.exit_code == 0, result.output
    plan = folder / "plan.json"
    result = runner.invoke(
        app,
        ["plan", "--profile", str(profile), "--limit", "4rps", "--slo", "ttft:p95<=2s",
         "--headroom", "0", "--redundancy", "0", "--no-fleet-check", "-o", str(plan)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return plan, profile


def test_the_plans_own_profile_built_from_a_log_is_accepted(
    planned_from_a_log: tuple[Path, Path],
) -> None:
    """Planted before the fix: the plan recorded source.digest (the log's) and verify compared
    the profile JSON's own digest, so every profile built from a log was refused."""
    from planner.verify.options import VerifyOptions, load_inputs
    from profiles.model import load_profile

    plan_path, profile_path = planned_from_a_log
    profile = load_profile(profile_path)
    assert profile.source.digest and profile.source.digest != profile.digest()
    options = VerifyOptions.model_construct(plan_path=plan_path, profile_path=profile_path)
    plan, loaded = load_inputs(options)
    assert plan.inputs.profile_digest == loaded.digest() == profile.digest()


def test_a_plan_that_recorded_the_logs_digest_is_refused_with_the_way_out(
    planned_from_a_log: tuple[Path, Path], tmp_path: Path
) -> None:
    import json

    from profiles.model import load_profile

    plan_path, profile_path = planned_from_a_log
    old = json.loads(plan_path.read_text())
    old["inputs"]["profile_digest"] = load_profile(profile_path).source.digest
    legacy = tmp_path / "old-plan.json"
    legacy.write_text(json.dumps(old))
    code, out = _verify((legacy, profile_path), tmp_path, "--host", "http://127.0.0.1:9")
    assert code == 2, out
    assert "digest of the log" in " ".join(out.split()) and "capplan plan --profile" in out
