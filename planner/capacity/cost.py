"""What a plan costs: GPU-hour prices (given, or the public price table), a month's cost
of a fleet, and the GPU cost of a million output tokens at an instance's limit. Pure."""

from __future__ import annotations

from contracts.errors import ConfigError
from contracts.plan import Cost, Scenario
from planner.engine.catalog import normal_gpu_name

HOURS_PER_MONTH = 730.0
# The price source of a price the user gave (plan.json's price_source; the re-plan command
# carries --gpu-hour-price only then).
GIVEN_PRICE_SOURCE = "given (--gpu-hour-price)"

# Public on-demand list prices per GPU-hour (USD), per GPU of the provider's instance type.
# Each entry names its source and date; prices change: pass --gpu-hour-price for your own.
PRICE_TABLE: dict[str, tuple[float, str]] = {
    "H100-80GB": (
        2.99,
        "Lambda Cloud on-demand 8x H100 SXM, $2.99/GPU-hour (lambdalabs.com/service/gpu-cloud "
        "pricing, 2024)",
    ),
    "A100-80GB": (
        1.79,
        "Lambda Cloud on-demand 8x A100 SXM 80GB, $1.79/GPU-hour (lambdalabs.com/service/"
        "gpu-cloud pricing, 2024)",
    ),
    "A10-24GB": (
        0.75,
        "Lambda Cloud on-demand 1x A10 24GB, $0.75/GPU-hour (lambdalabs.com/service/gpu-cloud "
        "pricing, 2024)",
    ),
    "H200-141GB": (
        3.50,
        "approximate public on-demand H200 price, $3.50/GPU-hour (neocloud list prices, "
        "early 2025; least certain entry)",
    ),
    "L40S-48GB": (
        1.86,
        "AWS g6e.xlarge (1x L40S) us-east-1 on-demand, $1.861/hour "
        "(aws.amazon.com/ec2/pricing, 2024)",
    ),
}


def gpu_hour_price(gpu: str, given_usd: float | None) -> tuple[float, str]:
    """The GPU-hour price and its source: the given one, else the public price table.

    Raises ConfigError for a non-positive price or a GPU the table does not list.
    """
    if given_usd is not None:
        if not given_usd > 0:
            raise ConfigError(f"--gpu-hour-price must be > 0, got {given_usd}")
        return given_usd, GIVEN_PRICE_SOURCE
    wanted = normal_gpu_name(gpu)  # as the engine catalog matches it
    for name, entry in PRICE_TABLE.items():
        key = normal_gpu_name(name)
        if key == wanted or key.split("-")[0] == wanted:
            return entry
    raise ConfigError(
        f"no public price on file for GPU {gpu!r} (table: {', '.join(PRICE_TABLE)}); "
        f"give --gpu-hour-price"
    )


def price_or_note(gpu: str, given_usd: float | None) -> tuple[float, str | None]:
    """The GPU-hour price and None, or 0 and why there is none: a board with no public price
    on file, and none given, still gets its limit and instances from whatif (the question it
    answers first); only its cost waits for --gpu-hour-price. A bad given price still raises."""
    try:
        return gpu_hour_price(gpu, given_usd)[0], None
    except ConfigError:
        if given_usd is not None:
            raise
        return 0.0, (
            f"no public price on file for {gpu}: limit and instances without a cost; "
            "--gpu-hour-price costs it"
        )


def monthly_cost_usd(gpus: int, gpu_hour_price_usd: float) -> float:
    """GPUs x price x 730 hours (the mean month)."""
    return gpus * gpu_hour_price_usd * HOURS_PER_MONTH


def build_cost(scenarios: list[Scenario], gpu_hour_price_usd: float, price_source: str) -> Cost:
    """The cost block: the first scenario's monthly cost and every scenario's, keyed by growth."""
    return Cost(
        gpu_hour_price_usd=gpu_hour_price_usd,
        price_source=price_source,
        hours_per_month=HOURS_PER_MONTH,
        monthly_usd=scenarios[0].monthly_cost_usd,
        per_scenario_monthly_usd={f"{s.growth:g}x": s.monthly_cost_usd for s in scenarios},
    )


def usd_per_million_output_tokens(
    limit_rps: float, mean_output_tokens: float, tp: int, gpu_hour_price_usd: float
) -> float:
    """GPU cost of a million output tokens when one instance runs at its limit.

    tp GPUs x price per hour / (limit x mean output tokens x 3600 s) x 1e6. Raises
    ConfigError for a non-positive limit or output length.
    """
    if not limit_rps > 0 or not mean_output_tokens > 0:
        raise ConfigError("the limit and the mean output length must be > 0")
    tokens_per_hour = limit_rps * mean_output_tokens * 3600.0
    return tp * gpu_hour_price_usd / tokens_per_hour * 1e6
