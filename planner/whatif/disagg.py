"""Prefill/decode disaggregation at the fleet level, in virtual time.

A disaggregated unit (`1p3d`) is `p` prefill instances and `d` decode instances of one
engine configuration, the pools sized separately. A request is prefilled in the prefill
pool as a one-token request (least outstanding first); its prompt's KV cache then crosses a
link of a stated bandwidth: each GPU sends its shard over its own link, so the transfer
takes KV bytes per GPU (`kv_bytes_per_token` x prompt tokens) / the per-GPU link bandwidth,
plus a fixed latency. The decode pool admits the request with that KV as computed
(`EngineRequest.kv_ready_tokens`; a preempted request recomputes it) and streams every
output token, the first included, as vLLM's disaggregated proxy does. So the client's
TTFT = prefill queue + prefill + KV transfer + decode queue + one decode step, and decodes
never wait behind another request's prefill chunk.

The pools' engines are `planner.engine.Engine` under `planner.fleet.sim.simulate_fleet`, the
same model every other prediction runs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from contracts.errors import ConfigError
from planner.engine import EngineConfig, EngineRequest, kv_bytes_per_token
from planner.fleet.sim import FleetRun, FleetSimulation, simulate_fleet
from planner.limit.predict import EngineProbe, simulated_records

# The KV link when not given: one 400 Gb/s RDMA NIC per GPU (InfiniBand NDR / RoCE, as in a
# DGX H100: eight ConnectX-7 for eight GPUs), 50 GB/s one way, and about 20 us to set up
# one transfer (NIXL / Mooncake-style GPU-direct RDMA). A stated assumption, not a measurement.
DEFAULT_KV_LINK_BANDWIDTH_BYTES_PER_S = 50e9
DEFAULT_KV_LINK_LATENCY_S = 20e-6

_UNIT = re.compile(r"^(\d+)p(\d+)d$")


@dataclass(frozen=True, kw_only=True)
class Disagg:
    """A disaggregated unit: prefill and decode instances and the KV link between them."""

    prefill: int
    decode: int
    link_bandwidth_bytes_per_s: float = DEFAULT_KV_LINK_BANDWIDTH_BYTES_PER_S
    link_latency_s: float = DEFAULT_KV_LINK_LATENCY_S

    @property
    def instances(self) -> int:
        return self.prefill + self.decode

    @property
    def name(self) -> str:
        return f"{self.prefill}p{self.decode}d"

    def transfer_s(self, config: EngineConfig, prompt_tokens: int) -> float:
        """Seconds to move one prompt's KV: KV bytes per GPU / link bandwidth + latency."""
        kv_bytes = prompt_tokens * kv_bytes_per_token(config)
        return kv_bytes / self.link_bandwidth_bytes_per_s + self.link_latency_s


def parse_disagg(
    value: str,
    link_bandwidth_bytes_per_s: float = DEFAULT_KV_LINK_BANDWIDTH_BYTES_PER_S,
    link_latency_s: float = DEFAULT_KV_LINK_LATENCY_S,
) -> Disagg | None:
    """`off` -> None (aggregated instances); `1p3d` -> 1 prefill and 3 decode instances.

    Raises ConfigError for another value or a pool of zero instances.
    """
    if value == "off":
        return None
    m = _UNIT.match(value)
    if m is None or int(m[1]) < 1 or int(m[2]) < 1:
        raise ConfigError(
            f"disaggregation: {value!r} is neither 'off' nor '<prefill>p<decode>d' with "
            f"at least one instance in each pool (e.g. 1p3d)"
        )
    if not link_bandwidth_bytes_per_s > 0:
        raise ConfigError(f"the KV link bandwidth must be > 0, got {link_bandwidth_bytes_per_s}")
    return Disagg(
        prefill=int(m[1]),
        decode=int(m[2]),
        link_bandwidth_bytes_per_s=link_bandwidth_bytes_per_s,
        link_latency_s=link_latency_s,
    )


def instances_per_unit(settings: dict[str, str]) -> int:
    """Instances one candidate's unit holds: p + d when disaggregated, else 1."""
    spec = parse_disagg(settings.get("disaggregation", "off"))
    return spec.instances if spec is not None else 1


def simulate_disaggregated(
    requests: Sequence[EngineRequest], config: EngineConfig, spec: Disagg
) -> FleetRun:
    """Replay `requests` against a disaggregated unit; per-request results as the client sees
    them (arrays in arrival order, times from the original arrival)."""
    reqs = sorted(requests, key=lambda r: r.arrival_s)
    prefill = simulate_fleet(
        [dataclasses.replace(r, max_tokens=1, min_tokens=0) for r in reqs],
        config,
        spec.prefill,
    )
    ready_s = prefill.arrival_s + prefill.ttft_s
    handed = [
        dataclasses.replace(
            r,
            arrival_s=float(t + spec.transfer_s(config, r.prompt_tokens)),
            kv_ready_tokens=r.prompt_tokens,
        )
        for r, t in zip(reqs, ready_s, strict=True)
    ]
    order = sorted(range(len(handed)), key=lambda k: handed[k].arrival_s)
    decode = simulate_fleet([handed[k] for k in order], config, spec.decode)
    back = np.empty(len(order), dtype=np.int64)
    back[order] = np.arange(len(order))  # decode row of each request in arrival order
    arrival = prefill.arrival_s
    handed_s = decode.arrival_s[back]
    return FleetRun(
        instances=spec.instances,
        routing=decode.routing,
        arrival_s=arrival,
        ttft_s=handed_s + decode.ttft_s[back] - arrival,
        tpot_s=decode.tpot_s[back],
        e2e_s=handed_s + decode.e2e_s[back] - arrival,
        output_tokens=decode.output_tokens[back],
        instance=decode.instance[back] + spec.prefill,
        simulated_s=max(prefill.simulated_s, decode.simulated_s),
        wall_s=prefill.wall_s + decode.wall_s,
        steps=prefill.steps + decode.steps,
    )


@dataclass(kw_only=True)
class DisaggProbe(EngineProbe):
    """`planner.limit.predict.EngineProbe` over one disaggregated unit instead of one instance.

    A level watched to its cap is simulated twice over the same requests (the watched span,
    then the requests sent before the stop, which are the same ones): the second run is
    taken from the first (the engine is deterministic).
    """

    disagg: Disagg | None = None
    _last: tuple[tuple[int, int, int, int], pl.DataFrame] | None = None

    def _simulate(self, requests: list[EngineRequest]) -> pl.DataFrame:
        key = (self.levels, len(requests), id(requests[0]), id(requests[-1])) if requests else None
        if key is not None and self._last is not None and self._last[0] == key:
            return self._last[1]
        records = self._simulate_once(requests)
        if key is not None:
            self._last = (key, records)
        return records

    def _simulation(self, requests: list[EngineRequest]) -> FleetSimulation | None:
        # Not super()'s: it sees this class's own `_simulate` and would answer None.
        return FleetSimulation(requests, self.config, 1) if self.disagg is None else None

    def _simulate_once(self, requests: list[EngineRequest]) -> pl.DataFrame:
        if not requests or self.disagg is None:
            return super()._simulate(requests)
        run = simulate_disaggregated(requests, self.config, self.disagg)
        return simulated_records(run.arrival_s, run.ttft_s, run.e2e_s, run.tpot_s).with_columns(
            pl.Series("input_tokens", [r.prompt_tokens for r in requests], dtype=pl.Int64),
            pl.Series("output_tokens", run.output_tokens, dtype=pl.Int64),
        )
