"""Fuzzing `capplan profile` with random logs (tests/profiles/fuzzlogs.py): the bad-input contract.

The contract, checked on every case through the real CLI: exit code 0 with a profile whose
skipped rows are counted, or exit code 2 with one `error:` line on stderr. Never a traceback,
never a Python warning, never another exit code, and each case ends within CASE_LIMIT_S.

The default run tries DEFAULT_EXAMPLES cases with a fixed seed (stable in CI). A long run with
fresh random cases, which prints how many cases it tried and how they ended:

    CAPPLAN_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/profiles/test_fuzz.py -s
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from capplan.cli import app
from profiles.model import load_profile
from tests.profiles.fuzzlogs import FuzzLog, fuzz_logs

DEFAULT_EXAMPLES = 80
LONG_RUN = "CAPPLAN_FUZZ_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("CAPPLAN_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
CASE_LIMIT_S = 60.0  # a hang bound, far above the ~0.1 s a case takes; not a speed check
# The whole run's bound for pytest-timeout: the project's 600 s default is too short for a long
# run (5000 cases take about 10 minutes on a shared 2-core machine).
RUN_LIMIT_S = max(600, EXAMPLES)
REPO = Path(__file__).resolve().parents[2]

_settings = settings(
    max_examples=EXAMPLES,
    deadline=None,  # the per-case bound is CASE_LIMIT_S, enforced below
    derandomize=not LONG_RUN,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check_contract(code: int, stderr: str, log: Path, out: Path, recipe: str) -> str:
    """How a case ended: "ok", "ok with skips" or "error"; AssertionError if it broke contract."""
    where = f"{log.name} ({recipe})"
    assert "Traceback" not in stderr, f"{where}: traceback\n{stderr}"
    assert not re.search(r"\w+Warning: ", stderr), f"{where}: a Python warning\n{stderr}"
    assert code in (0, 2), f"{where}: exit code {code}\n{stderr}"
    if code == 2:
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(lines) == 1, f"{where}: expected one error line\n{stderr}"
        assert lines[0].startswith("error: "), f"{where}: {stderr}"
        return "error"
    prof = load_profile(out)
    src = prof.source
    assert src.rows > 0 and prof.requests == src.rows, where
    assert src.rows_skipped == sum(src.skip_reasons.values()), where
    assert len(src.skip_examples) == min(src.rows_skipped, 5), where
    if src.rows_skipped:
        assert f"skipped {src.rows_skipped:,} row(s)" in stderr, f"{where}: skips not shown"
        return "ok with skips"
    return "ok"


def _invoke(log: FuzzLog, folder: Path) -> tuple[int, str, Path, Path]:
    path = folder / log.name
    path.write_bytes(log.data)
    out = folder / "profile.json"
    with warnings.catch_warnings(record=True) as caught:
        # A Python warning would reach the user's terminal as extra lines on stderr.
        warnings.simplefilter("always")
        res = CliRunner().invoke(app, ["profile", str(path), "-o", str(out), "-q", *log.options])
    stderr = res.stderr + "".join(
        f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}\n" for w in caught
    )
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        stderr += "Traceback:\n" + "".join(traceback.format_exception(res.exception))
    return res.exit_code, stderr, path, out


@pytest.mark.timeout(RUN_LIMIT_S)
def test_random_logs_exit_0_with_counted_skips_or_2_with_one_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tally: Counter[str] = Counter()
    started = time.perf_counter()

    @_settings
    @given(log=fuzz_logs())
    def case(log: FuzzLog) -> None:
        with tempfile.TemporaryDirectory(prefix="capplan-fuzz-") as tmp:
            with ThreadPoolExecutor(max_workers=1) as pool:
                job = pool.submit(_invoke, log, Path(tmp))
                try:
                    code, stderr, path, out = job.result(timeout=CASE_LIMIT_S)
                except FutureTimeout:
                    pytest.fail(f"{log.name} ({log.recipe}): no answer in {CASE_LIMIT_S:.0f} s")
            tally[check_contract(code, stderr, path, out, log.recipe)] += 1
        tally["cases"] += 1

    case()
    with capsys.disabled():
        print(
            f"\nfuzz: {tally['cases']} cases in {time.perf_counter() - started:.0f} s, "
            f"0 tracebacks; exit 0: {tally['ok']} ({tally['ok with skips']} more with counted "
            f"skips), exit 2: {tally['error']}"
        )
    assert tally["cases"] >= min(EXAMPLES, 20)
    assert tally["ok"] + tally["ok with skips"] > 0 and tally["error"] > 0  # both paths seen


@settings(_settings, max_examples=3)
@given(log=fuzz_logs())
def test_a_sample_through_the_installed_command(log: FuzzLog) -> None:
    """A few cases in a process of their own: what a user's shell sees, hard-killed if hung."""
    with tempfile.TemporaryDirectory(prefix="capplan-fuzz-") as tmp:
        path = Path(tmp) / log.name
        path.write_bytes(log.data)
        out = Path(tmp) / "profile.json"
        cmd = [
            sys.executable,
            "-c",
            "import sys; from capplan.cli import main; sys.argv[0] = 'capplan'; main()",
            "profile",
            str(path),
            "-o",
            str(out),
            "-q",
            *log.options,
        ]
        try:
            done = subprocess.run(
                cmd, cwd=REPO, capture_output=True, text=True, timeout=CASE_LIMIT_S * 2
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{log.name} ({log.recipe}): no answer in {CASE_LIMIT_S * 2:.0f} s")
        check_contract(done.returncode, done.stderr, path, out, log.recipe)
