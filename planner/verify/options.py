"""What `capplan verify` runs, validated once at the edge, and the inputs it checks first.

`VerifyOptions` holds the command's choices; `load_inputs` reads the plan and the profile and
refuses a pair that does not belong together (the plan's profile digest), an instance list
with a duplicate or of the wrong size, and a test with no instance left to serve.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import ConfigError
from contracts.jsonio import read_json, validate
from contracts.plan import PLAN_SCHEMA, Plan
from contracts.run import Stage, StagePlan
from planner.fleet.routing import Routing
from planner.limit.measured.steady import SteadyRules
from planner.slo.spec import SloField
from profiles.model import Profile, load_profile


class VerifyOptions(BaseModel):
    """One verify test: the plan's fleet less `instances_down`, at its design peak."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    plan_path: Path
    profile_path: Path
    out_dir: Path = Field(description="run directory; verify.json is written into it")
    host: str | None = Field(default=None, description="the user's load balancer")
    hosts: list[str] = Field(default_factory=list, description="instances capplan routes to")
    instances: list[str] = Field(
        default_factory=list, description="with host: the pool's instances, for their metrics"
    )
    instances_down: int = Field(default=0, ge=0)
    routing: Routing = Field(
        default="round_robin",
        description="capplan's routing (hosts), or the balancer's (simulated)",
    )
    model: str = ""
    endpoint: str = "chat"
    api_key_env: str | None = None
    slo: SloField | None = Field(default=None, description="default: the plan's SLO")
    steady_s: float = Field(default=120.0, gt=0)
    burst_s: float = Field(default=30.0, gt=0)
    recovery_s: float = Field(default=120.0, gt=0, description="longest wait for the recovery")
    burst_factor: float = Field(default=2.0, gt=1.0)
    time_scale: float = Field(default=1.0, gt=0)
    seed: int = 0
    workers: int = Field(default=0, ge=0)
    master_bind: str | None = Field(
        default=None,
        description="HOST:PORT: the Locust master alone there; the load comes from `capplan "
        "worker`s on other hosts (with hosts, capplan's router listens on HOST too)",
    )
    expect_workers: int = Field(
        default=0, ge=0, description="with master_bind: start once this many workers joined"
    )
    request_timeout_s: float = Field(default=300.0, gt=0)
    replay_path: str | None = None
    replay_speed: float = Field(default=1.0, gt=0)
    rules: SteadyRules = Field(
        default_factory=lambda: SteadyRules(
            warmup_e2es=3.0,
            window_e2es=3.0,
            effective_requests=20.0,
            tail_requests=0.0,
            min_window_s=20.0,
        )
    )
    preflight: bool = True
    wait_s: float = Field(
        default=0.0, ge=0, description="longest wait for host/hosts to accept connections"
    )


def _normalized(option: str, urls: list[str]) -> list[str]:
    out = [u.strip().rstrip("/") for u in urls if u.strip()]
    seen: set[str] = set()
    for url in out:
        if url in seen:
            raise ConfigError(f"{option}: {url} is listed twice; each instance once")
        seen.add(url)
        if "://" not in url:
            raise ConfigError(f"{option}: {url!r} is not a URL; expected http://HOST:PORT")
    return out


def checked(options: VerifyOptions, plan: Plan) -> VerifyOptions:
    """`options` with its URL lists normalized; ConfigError for what cannot be tested."""
    if (options.host is None) == (not options.hosts):
        raise ConfigError("give either --host (your load balancer) or --hosts (the instances)")
    hosts = _normalized("--hosts", options.hosts)
    instances = _normalized("--instances", options.instances)
    listed = hosts or instances
    if listed and len(listed) != plan.instances:
        option = "--hosts" if hosts else "--instances"
        raise ConfigError(
            f"{option} lists {len(listed)} instance(s); the plan has {plan.instances}: list "
            "every planned instance (--instances-down takes some out)"
        )
    if options.instances_down >= plan.instances:
        raise ConfigError(
            f"--instances-down {options.instances_down}: the plan has {plan.instances} "
            "instance(s); at least one must serve"
        )
    if options.host is not None and "://" not in options.host:
        raise ConfigError(f"--host {options.host!r}: expected a base URL, e.g. http://HOST:PORT")
    router_host(options)  # a --master-bind capplan's router cannot listen on fails here
    return options.model_copy(update={"hosts": hosts, "instances": instances})


def router_host(options: VerifyOptions) -> str:
    """Where capplan's router (--hosts) listens: loopback, or with remote workers the address
    they reach the master at (--master-bind's HOST), which must then be one address, not a
    wildcard. Raises ConfigError for a --master-bind that is not HOST:PORT or is a wildcard."""
    if options.master_bind is None:
        return "127.0.0.1"
    from planner.loadtest.remote import parse_address

    host, _ = parse_address(options.master_bind, "--master-bind")
    if options.hosts and host in ("0.0.0.0", "::", ""):
        raise ConfigError(
            f"--master-bind {options.master_bind} with --hosts: the workers send their load to "
            "capplan's router, which listens on --master-bind's address; give the one the "
            "workers reach this host at, not a wildcard"
        )
    return host


def load_inputs(options: VerifyOptions) -> tuple[Plan, Profile]:
    """The plan and its profile; ConfigError when the profile is not the one it was planned on."""
    plan = validate(Plan, read_json(options.plan_path, "plan"), options.plan_path, PLAN_SCHEMA)
    profile = load_profile(options.profile_path)
    recorded = plan.inputs.profile_digest
    if profile.digest() == recorded:
        return plan, profile
    if profile.source.digest and profile.source.digest == recorded:
        # plans written before 2026-12-06 recorded the log's digest for a profile built from a
        # log: such a plan names the log, not which profile of it, so it cannot vouch for one
        raise ConfigError(
            f"{options.plan_path} records the digest of the log {options.profile_path} was "
            f"built from ({recorded[:12]}), as plans written before 2026-12-06 did, not the "
            f"profile's own: run `capplan plan --profile {options.profile_path} ...` again"
        )
    raise ConfigError(
        f"{options.profile_path} is not the profile {options.plan_path} was planned on "
        f"(profile digest {profile.digest()[:12]}, the plan's inputs.profile_digest "
        f"{recorded[:12]}): give the plan's own profile"
    )


def design_rate_rps(plan: Plan) -> float:
    """The plan's design peak: the rate its fleet check simulated (peak x growth)."""
    if plan.checks.fleet is not None:
        return plan.checks.fleet.rate_rps
    return plan.demand.peak_rps * plan.scenarios[0].growth


def verify_stages(options: VerifyOptions, rate_rps: float) -> StagePlan:
    """Steady at the design peak, the burst at `burst_factor` x, then the peak again until
    the SLO's TTFT recovers (at most `recovery_s`); a replay's steady stage is the log."""
    arrival = "replay" if options.replay_path else "poisson"
    return StagePlan(
        name="verify",
        stages=[
            Stage(
                name="steady",
                role="steady",
                duration_s=options.steady_s,
                rate_rps=rate_rps,
                arrival=arrival,
            ),
            Stage(
                name="burst",
                role="burst",
                duration_s=options.burst_s,
                rate_rps=rate_rps * options.burst_factor,
            ),
            Stage(
                name="recovery", role="recovery", duration_s=options.recovery_s, rate_rps=rate_rps
            ),
        ],
    )
