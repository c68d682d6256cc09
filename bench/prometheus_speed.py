"""Speed and memory of `capplan profile prometheus:URL` on a quarter of a fleet's metrics, against
the floor of fetching what it reads at the step.

    python bench/prometheus_speed.py [--instances 20] [--days 90] [--keep DIR] [--chunk 10000]

1. Generates a vLLM fleet's metrics (testkit/prom_fleet.py: every family, the request counter
   and the running/waiting gauges at every 15 s scrape; histograms and prefix counters once an
   hour, which is where the reader reads them, to keep the backfill to minutes) and backfills
   them into a real Prometheus with promtool. With --keep DIR the TSDB stays there and later
   runs reuse it (the generation and backfill of a quarter of 20 instances take several
   minutes on 2 cores; their times are printed).
2. Runs, each in its own process, (a) the floor: the same range queries of the series the
   reader reads densely (the request counter at the step, both gauges once a minute), chunk
   by chunk, one at a time, each answer parsed as JSON and dropped, nothing computed; (b)
   `capplan profile prometheus:URL` over the whole span. Prints wall time, CPU time and peak
   RSS of each, Prometheus's own CPU time during each, the points read, and the ratio to the
   floor. Goal (issue 33): a quarter of 15 s samples for 20 instances in under a minute, in
   bounded memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.prom_fleet import STEP_S, PromServer, generate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MATCH = '{job="vllm"}'
# What the reader reads densely: the request counter at the step, the gauges once a minute.
STEP_QUERIES = (
    ('sum by (instance) (vllm:request_success_total{job="vllm"})', STEP_S),
    ('sum by (instance) (vllm:num_requests_running{job="vllm"})', 60),
    ('sum by (instance) (vllm:num_requests_waiting{job="vllm"})', 60),
)

FLOOR = """
import json, sys, urllib.parse, urllib.request
url = sys.argv[1]
start, end, chunk = map(int, sys.argv[2:5])
points = 0
for query, step in json.loads(sys.argv[5]):
    t = start
    while t <= end:
        stop = min(t + (chunk - 1) * step, end)
        q = urllib.parse.urlencode({"query": query, "start": t, "end": stop, "step": step})
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=300) as r:
            body = json.load(r)
        points += sum(len(s["values"]) for s in body["data"]["result"])
        t = stop + step
print(points)
"""


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# Runs a command as its only child and prints the child's resource use as the last line of
# stderr, so promtool's or an earlier run's peak RSS never counts.
RUSAGE = """
import json, resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps([r.ru_utime + r.ru_stime, r.ru_maxrss]), file=sys.stderr)
sys.exit(code)
"""


def _timed(cmd: list[str], prom_pid: int) -> dict[str, float | str]:
    """Run `cmd`; its wall and CPU time, peak RSS, Prometheus's CPU meanwhile, and its stdout."""
    prom0, t0 = _cpu_s(prom_pid), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", RUSAGE, *cmd], capture_output=True, text=True, cwd=ROOT, check=False
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    cpu_s, rss_kb = json.loads(proc.stderr.strip().splitlines()[-1])
    return {
        "wall_s": wall,
        "cpu_s": cpu_s,
        "peak_rss_mb": rss_kb / 1024,
        "prometheus_cpu_s": _cpu_s(prom_pid) - prom0,
        "stdout": proc.stdout,
    }


def _series_count(url: str) -> int:
    q = urllib.parse.urlencode({"match[]": MATCH})
    with urllib.request.urlopen(f"{url}/api/v1/series?{q}", timeout=60) as r:
        return len(json.load(r)["data"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=20)
    ap.add_argument("--days", type=float, default=90.0)
    ap.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the TSDB here")
    ap.add_argument("--chunk", type=int, default=10_000, help="steps per range query")
    args = ap.parse_args()
    work = args.keep or Path(os.environ.get("TMPDIR", "/tmp")) / f"capplan-prom-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    state = work / "truth.json"  # what was generated, and whether the TSDB holds it yet
    om = work / "fleet.om"
    want = {"instances": args.instances, "days": args.days}
    info = json.loads(state.read_text()) if state.exists() else {}
    if info.get("want") != want or not (info.get("backfilled") or om.exists()):
        shutil.rmtree(work / "tsdb", ignore_errors=True)
        t0 = time.perf_counter()
        truth = generate(
            om, days=args.days, instances=args.instances, base_rps=0.2, restart=False,
            slow_every=3600 // STEP_S, keep_requests=False,
        )  # fmt: skip
        info = {
            "want": want,
            "start": truth.start_epoch_s,
            "end": truth.end_epoch_s,
            "requests": int(sum(int(c.sum()) for c in truth.counts.values())),
            "backfilled": False,
        }
        state.write_text(json.dumps(info))
        print(f"generated {om.stat().st_size / 1e6:,.0f} MB of OpenMetrics in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)  # fmt: skip
    if info["backfilled"]:
        print(f"reusing the TSDB in {work}")
        server = PromServer(None, work)
    else:  # generated now, or by a run whose backfill did not finish
        shutil.rmtree(work / "tsdb", ignore_errors=True)
        t0 = time.perf_counter()
        server = PromServer(om, work, backfill_timeout_s=4 * 3600)
        print(f"promtool backfill and Prometheus start {time.perf_counter() - t0:.0f} s")
        om.unlink()
        state.write_text(json.dumps({**info, "backfilled": True}))
    try:
        start, end = int(info["start"]), int(info["end"])
        steps = (end - start) // STEP_S
        print(f"{args.instances} instances x {args.days:g} days at {STEP_S} s: {steps:,} steps, "
              f"{_series_count(server.url):,} series")  # fmt: skip
        floor = _timed(
            [sys.executable, "-c", FLOOR, server.url, str(start), str(end), str(args.chunk),
             json.dumps(STEP_QUERIES)],
            server.proc.pid,
        )  # fmt: skip
        out = work / "profile.json"
        prof = _timed(
            [sys.executable, "-m", "capplan", "profile", f"prometheus:{server.url}",
             "--match", MATCH, "--since", str(start), "--until", str(end), "-o", str(out), "-q"],
            server.proc.pid,
        )  # fmt: skip
        profile = json.loads(out.read_text())
        assert profile["requests"] == info["requests"], "the profile lost requests"
        points = int(str(floor["stdout"]).strip())
        print(f"\n{'':32}{'wall s':>9}{'CPU s':>9}{'peak RSS MB':>13}{'Prometheus CPU s':>18}")
        for name, r in (("floor (fetch the dense series)", floor), ("capplan profile", prof)):
            print(f"{name:32}{r['wall_s']:9.1f}{r['cpu_s']:9.1f}{r['peak_rss_mb']:13.0f}"
                  f"{r['prometheus_cpu_s']:18.1f}")  # fmt: skip
        queries = profile["source"]["metrics"]["queries"]
        rate = points / float(floor["wall_s"]) / 1e6
        print(f"\npoints read densely: {points:,} ({rate:.2f} M/s "
              f"for the floor); capplan's queries: {queries}; requests {profile['requests']:,} "
              f"(the generator's exactly)")  # fmt: skip
        print(
            f"capplan profile / floor: {float(prof['wall_s']) / float(floor['wall_s']):.2f}x "
            f"wall; goal: under 60 s -> {'met' if float(prof['wall_s']) < 60 else 'NOT met'}"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
