"""`capplan demo`: the whole loop on built-in defaults, without a GPU, in a few minutes.

Profiles the sample trace shipped in the package (the first ten minutes of Azure's
conversation trace), starts the engine emulator in its own process, finds the per-instance
SLO limit with a short search through Locust, verifies it with a short
steady-burst-recovery run, plans the fleet for the sample's peak, and writes the PDF. Every
stage is the same library code the individual commands run; the demo only picks short
durations and wires the files together.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from capplan.commands.console import counted
from contracts.errors import RunError
from contracts.jsonio import write_model
from contracts.limit import LIMIT_FILE
from reports.i18n import Lang

Echo = Callable[[str], None]

SAMPLE = "azure_conv"
DEMO_GPU = "H100-80GB"
DEMO_MODEL = "llama-3.1-8b"
DEMO_SLO = "ttft:p95<=2s"
MODEL_NAME = "demo-llama-3.1-8b"


class DemoOptions(BaseModel):
    """What the demo runs; the defaults finish in about three minutes on two cores. The CLI
    sets the first four (-o, --lang, --seed, --cjk-font) with build_options; each option's
    default and choices are declared once here.

    The emulator runs the engine `speed` times faster than wall time and the load test
    schedules and records in the engine's time (`time_scale`), so levels that cover many
    request lifetimes (the steady-state rules of `capplan limit`, in engine time) fit the
    budget; `stream_interval` tokens share a chunk so the sped-up stream stays light.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    out_pdf: Path = Field(default=Path("reports/demo.pdf"), description="the PDF to write")
    lang: Lang = Field(default="en", description="the report's language")
    seed: int = 0
    cjk_font: Path | None = Field(
        default=None, description="None: CAPPLAN_CJK_FONT, fontconfig, shipped (reports.fonts)"
    )
    gpu: str = DEMO_GPU
    model: str = DEMO_MODEL
    slo: str = DEMO_SLO
    # 4x: at 6x on two cores the emulator's first tokens lagged its engine model by 15 ms
    # more under load than alone, more than the fast search's delay check allows there (at
    # 4x 18-26 ms until its prompts' encoding got 4.8x faster, bench/emulator_parse.py)
    speed: float = Field(default=4.0, gt=0)
    stream_interval: int = Field(default=32, ge=1)
    # The measured search (when the fast search's model is inadequate, or with
    # method="measured") starts just below the engine model's prediction and brackets by 1.25x.
    start_share: float = Field(default=0.9, gt=0)
    search_growth: float = Field(default=1.25, gt=1)
    tolerance: float = Field(default=0.08, gt=0, lt=1)
    max_levels: int = Field(default=6, ge=1)
    # steady 90 s, burst 22.5 s at twice the limit, recovery until it recovers, at most 90 s
    # (engine time; after 120 s and 30 s it took 40-45 s)
    verify_steady_s: float = Field(default=90.0, gt=0)
    # fast (planner.limit.fast): one user measures what the client adds, the emulator's own
    # engine model predicts, open-loop chunks confirm and correct it; the measured search
    # takes over only when the model is inadequate
    method: Literal["measured", "fast"] = "fast"
    growth: tuple[Annotated[float, Field(gt=0)], ...] = (1.0, 1.5, 2.0)
    fleet_span_s: float = Field(default=120.0, gt=0)

    @property
    def work_dir(self) -> Path:
        """Where the demo's profile, run and plan go: next to the PDF."""
        return self.out_pdf.with_name(self.out_pdf.stem + "-files")


@dataclass(frozen=True, kw_only=True)
class DemoResult:
    pdf: Path
    profile: Path
    run_dir: Path
    plan: Path
    wall_s: float


def run_demo(options: DemoOptions, *, echo: Echo = print, warn: Echo | None = None) -> DemoResult:
    """Run profile -> emulator -> limit search + burst check -> plan -> PDF; return the paths.

    A Chinese demo chooses its font first, so a bad --cjk-font fails before the minutes of
    load testing, and a fallback to the non-embedded STSong-Light is reported to `warn`
    (default: stderr) at the start. Raises RunError when a stage cannot produce its result
    (e.g. no load level met the SLO), and whatever the stage itself raises
    (InputError/ConfigError/RunError/TargetError).
    """
    from contracts.limit import Prediction, write_limit
    from planner.capacity.arithmetic import limit_from_result
    from planner.capacity.plan import PlanOptions, build_plan
    from planner.emulator import emulator_subprocess
    from planner.engine import build_engine_config
    from planner.engine.build import DEFAULT_ENGINE
    from planner.limit.measured.config import SearchConfig
    from planner.limit.measured.steady import SteadyRules
    from planner.limit.options import LimitOptions
    from planner.limit.predict import predict_limit
    from planner.limit.run import run_limit
    from planner.slo.spec import parse_slo
    from planner.whatif.interval import limit_interval
    from profiles.build import build_profile
    from profiles.model import save_profile
    from profiles.samples import sample_path
    from reports import render_report, warn_on_stderr
    from reports.fonts import choose_cjk_font

    cjk_font = choose_cjk_font(options.cjk_font) if options.lang == "zh" else None
    if cjk_font is not None and cjk_font.warning is not None:
        (warn or warn_on_stderr)(cjk_font.warning)
    start = time.perf_counter()

    def step(text: str) -> None:
        echo(f"[{time.perf_counter() - start:5.0f} s] {text}")

    work = options.work_dir
    work.mkdir(parents=True, exist_ok=True)
    profile_path = work / "profile.json"
    run_dir = work / "limit-run"
    plan_path = work / "plan.json"

    step(f"1/5 profiling the shipped sample trace '{SAMPLE}'")
    profile = build_profile([str(sample_path(SAMPLE))], seed=options.seed)
    profile = profile.model_copy(update={"name": f"sample:{SAMPLE}"})
    save_profile(profile, profile_path)
    arr = profile.arrivals
    step(
        f"      {profile.source.rows:,} requests over {arr.duration_s:.0f} s, mean "
        f"{arr.mean_rate_rps:.2f} req/s, 60 s peak {arr.peak_rate_rps.get('60s', 0):.2f} req/s, "
        f"input mean {profile.lengths.input.mean:.0f} tokens, output mean "
        f"{profile.lengths.output.mean:.0f} tokens -> {profile_path}"
    )

    config = build_engine_config(options.gpu, options.model)
    slo = parse_slo(options.slo)
    # The demo's level rules, the same for the prediction and the measurement: the
    # correlation-time warm-up of `capplan limit`, but windows of 20 independent requests,
    # no tail rule and levels of at most 150 engine seconds, so the whole loop fits in about
    # three minutes on two cores (`capplan limit`'s defaults ask for 100 independent
    # requests, 10 in the tail, and allow 900 s).
    rules = SteadyRules(
        warmup_e2es=3.0, effective_requests=20.0, tail_requests=0.0, max_level_s=150.0
    )
    predicted = predict_limit(
        profile,
        config,
        SearchConfig(
            slo=slo, start=8.0, tolerance=options.tolerance, max_repeats=0, seed=options.seed
        ),
        rules,
        seed=options.seed,
    )
    if predicted.feasible_max is None:
        raise RunError(f"the engine model finds no load that meets {options.slo}")
    start_rps = round(options.start_share * predicted.feasible_max, 1)
    step(
        f"      the engine model predicts {predicted.feasible_max:.1f} req/s per instance at "
        f"{options.slo} (virtual time, steady-state levels); Locust measures it next"
        + ("" if options.method == "fast" else f", from {start_rps:g} req/s")
    )
    step(
        f"2/5 starting the engine emulator ({options.model} on {options.gpu}, no GPU needed; "
        f"{options.speed:g}x faster than wall time)"
    )
    with emulator_subprocess(
        config,
        seed=options.seed,
        model_name=MODEL_NAME,
        speed=options.speed,
        stream_interval=options.stream_interval,
    ) as url:
        step(f"      serving at {url}")
        step(
            f"3/5 searching the per-instance limit at {options.slo} ({options.method} search "
            f"in the engine's time), then a steady-burst-recovery check"
        )
        if run_dir.exists():
            import shutil

            shutil.rmtree(run_dir)
        limit = run_limit(
            LimitOptions(
                host=url,
                model=MODEL_NAME,
                slo=slo,
                out_dir=run_dir,
                profile=str(profile_path),
                dimension="rate",
                start=start_rps,
                steady_rules=rules,
                tolerance=options.tolerance,
                growth=options.search_growth,
                verify_burst=True,
                verify_steady_s=options.verify_steady_s,
                seed=options.seed,
                max_repeats=0,
                max_levels=options.max_levels,
                time_scale=options.speed,
                method=options.method,
                engine=config,  # the emulator's own engine: the fast search predicts with it
            ),
            echo=lambda line: step(f"      {line}"),
        )
    if limit.feasible_max is None:
        raise RunError(
            f"the demo's limit search found no load that meets {options.slo}; see {run_dir}"
        )
    measured_rps = limit.feasible_max
    # The emulator is the engine model in real time: `run_limit` read so on its /metrics and
    # marked the limit predicted, with the validation's interval (the plan keeps it). The
    # virtual search's figure goes beside it for comparison.
    limit = limit.model_copy(
        update={
            "prediction": Prediction(
                feasible_max=predicted.feasible_max,
                infeasible_min=predicted.infeasible_min,
                gpu=options.gpu,
                model=options.model,
                note=(
                    "engine model in virtual time, same search and steady-state rules; the "
                    f"emulator ran {options.speed:g}x faster than wall time and the load test "
                    "kept time in the engine's clock"
                ),
                interval=limit_interval(
                    predicted.feasible_max, DEFAULT_ENGINE, config.gpu.name
                ).contract(),
            ),
        }
    )
    write_limit(limit, run_dir / LIMIT_FILE)
    gap = measured_rps / predicted.feasible_max - 1.0
    step(
        f"      measured {measured_rps:.3g} req/s, engine model {predicted.feasible_max:.3g}"
        f" req/s ({gap:+.0%})"
    )

    step(f"4/5 planning instances for the sample's peak (growth {options.growth})")
    plan = build_plan(
        profile,
        limit_from_result(limit, str(run_dir / LIMIT_FILE), slo),
        PlanOptions(
            profile_path=str(profile_path),
            slo=slo,
            growth=options.growth,
            gpu=options.gpu,
            model=options.model,
            fleet_span_s=options.fleet_span_s,
            # The emulator runs this very engine model, so there is nothing to calibrate; a
            # limit measured on a real endpoint is calibrated by `capplan plan`.
            calibrate=False,
            seed=options.seed,
            name="demo",
        ),
        progress=lambda line: step(f"      {line}"),
    )
    write_model(plan_path, plan, "plan")
    step(f"      {counted(plan.instances, 'instance')} -> {plan_path}")

    step(f"5/5 writing the PDF ({options.lang})")
    pdf = render_report(
        profile_path, run_dir, plan_path, options.out_pdf, lang=options.lang, cjk_font=cjk_font
    )
    return DemoResult(
        pdf=pdf,
        profile=profile_path,
        run_dir=run_dir,
        plan=plan_path,
        wall_s=time.perf_counter() - start,
    )
