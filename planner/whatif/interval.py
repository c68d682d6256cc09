"""How sure a predicted limit is: an interval from the validation's error spread on published
server results, per engine and GPU class (`prediction_spread.yaml`, written by
`python bench/server_published.py --write-spread`).

The table holds, for each class `<engine>/<gpu class>` with enough rows, the quantiles of
published limit / predicted limit over the validation's rows; a class with fewer rows than
the table's `min_rows` (or none) takes the overall spread, and the interval says so. A
predicted limit L then carries [L x low, L x high]: where the published limit of a
configuration like it fell, relative to what the model predicted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from contracts.errors import ConfigError
from contracts.limit import IntervalSource, PredictedInterval

SPREAD_PATH = Path(__file__).with_name("prediction_spread.yaml")


@dataclass(frozen=True, kw_only=True)
class Spread:
    """Quantiles of published / predicted limit over `rows` validation rows."""

    low_ratio: float
    high_ratio: float
    rows: int


@dataclass(frozen=True, kw_only=True)
class SpreadTable:
    """The validation's spread per `<engine>/<gpu class>` and overall."""

    quantiles: tuple[float, float]
    min_rows: int
    gpu_classes: dict[str, str]  # catalog GPU name -> class
    classes: dict[str, Spread]
    overall: Spread
    source: str


@dataclass(frozen=True, kw_only=True)
class LimitInterval:
    """Where the true limit is expected, from the spread of `basis` (a class or `overall`)."""

    low_rps: float
    high_rps: float
    basis: str
    rows: int
    note: str  # why this basis (a fallback says which class had too few rows)
    source: IntervalSource  # the same, as the contracts' fields (for words in any language)

    def contract(self) -> PredictedInterval:
        """The interval as limit.json and plan.json store it (a rate limit: req/s)."""
        return PredictedInterval(low=self.low_rps, high=self.high_rps, source=self.source)


def _spread(doc: Any, where: str) -> Spread:
    try:
        low, high, rows = float(doc["low"]), float(doc["high"]), int(doc["rows"])
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{where}: needs numbers low, high and rows ({err})") from err
    if not 0 < low <= high:
        raise ConfigError(f"{where}: needs 0 < low <= high, got low {low}, high {high}")
    return Spread(low_ratio=low, high_ratio=high, rows=rows)


def load_spread(path: Path = SPREAD_PATH) -> SpreadTable:
    """The spread table at `path`; ConfigError naming the file and field when it is bad."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: cannot read the prediction spread ({err})") from err
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping")
    classes = {k: _spread(v, f"{path}: classes.{k}") for k, v in (doc.get("classes") or {}).items()}
    gpu_classes = {
        gpu: cls for cls, gpus in (doc.get("gpu_classes") or {}).items() for gpu in gpus or []
    }
    q = doc.get("quantiles", [0.1, 0.9])
    return SpreadTable(
        quantiles=(float(q[0]), float(q[1])),
        min_rows=int(doc.get("min_rows", 4)),
        gpu_classes=gpu_classes,
        classes=classes,
        overall=_spread(doc.get("overall"), f"{path}: overall"),
        source=str(doc.get("source", path.name)),
    )


@cache
def default_spread() -> SpreadTable:
    """The shipped table (read once per process)."""
    return load_spread(SPREAD_PATH)


def engine_family(engine: str) -> str:
    """`vllm@0.6` -> `vllm`: the class key's engine part."""
    return engine.split("@", 1)[0].strip().lower()


def class_key(engine: str, gpu: str, table: SpreadTable) -> str:
    """`<engine family>/<gpu class>` (`other` for a GPU the table does not class)."""
    return f"{engine_family(engine)}/{table.gpu_classes.get(gpu, 'other')}"


def limit_interval(
    limit_rps: float, engine: str, gpu: str, table: SpreadTable | None = None
) -> LimitInterval:
    """The interval of a predicted limit for `engine` on `gpu` (catalog name)."""
    table = table or default_spread()
    key = class_key(engine, gpu, table)
    spread = table.classes.get(key)
    class_rows = spread.rows if spread is not None else 0
    if spread is None or spread.rows < table.min_rows:
        spread = table.overall
    source = IntervalSource(
        basis=key if spread is not table.overall else "overall",
        class_key=key,
        rows=spread.rows,
        class_rows=class_rows,
        low_quantile=table.quantiles[0],
        high_quantile=table.quantiles[1],
    )
    return LimitInterval(
        low_rps=limit_rps * spread.low_ratio,
        high_rps=limit_rps * spread.high_ratio,
        basis=source.basis,
        rows=spread.rows,
        note=source_note(source, table.min_rows),
        source=source,
    )


def source_note(source: IntervalSource, min_rows: int | None = None) -> str:
    """The interval's source in English, as whatif prints it: `p10-p90 of 20 published
    trtllm/hopper rows`, or `p10-p90 of all 24 published rows: vllm/hopper has 0 (fewer than
    4)` (the table's `min_rows`, read from the shipped table when not given)."""
    lo_q, hi_q = (f"p{round(q * 100)}" for q in (source.low_quantile, source.high_quantile))
    if source.basis != "overall":
        return f"{lo_q}-{hi_q} of {source.rows} published {source.basis} rows"
    fewer = min_rows if min_rows is not None else default_spread().min_rows
    return (
        f"{lo_q}-{hi_q} of all {source.rows} published rows: {source.class_key} has "
        f"{source.class_rows} (fewer than {fewer})"
    )
