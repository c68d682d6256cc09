"""Tensor parallelism: the link a board's all-reduces cross, and what one all-reduce costs.

A tensor-parallel step does two all-reduces of each token's hidden state per layer. Their
cost is NCCL's own cost model (NVIDIA/nccl `src/graph/tuning.cc`, `ncclTopoTuneModel` and
`ncclTopoGetAlgoTime`), the one NCCL uses to pick an algorithm and protocol per call: a ring
all-reduce over `tp` GPUs takes 2 (tp - 1) steps, so

    time = base latency + 2 (tp - 1) x hop latency + bytes / algorithm bandwidth,
    algorithm bandwidth = bus bandwidth x protocol share x tp / (2 (tp - 1)),

for each protocol (LL: 8-byte flag-carrying stores, low latency at a quarter of the bus
bandwidth; LL128: 128-byte lines, NVLink only; Simple: full bandwidth, highest latency), and
NCCL runs the quickest: small messages (decode steps) pay the latency, large ones (prefill)
the ring's 2 (tp - 1) / tp share of the bytes over the link. The latency grows with the GPU
count; the bandwidth share tends to 2. Each board's link (bus bandwidth one way per GPU,
NVLink or PCIe) is in the catalog (`catalog.yaml`); a board without one is taken as PCIe.
`TP_LINKS` names links a what-if can force (`--tp-link`). Pipeline stages hand their
microbatch's hidden states to the next stage in one point-to-point send over the same link
(`PointToPoint`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LinkKind = Literal["nvlink", "pcie"]
LINK_KINDS: tuple[LinkKind, ...] = ("nvlink", "pcie")

NCCL_SOURCE = (
    "NVIDIA/nccl src/graph/tuning.cc (ncclTopoTuneModel: baseLat, hwLat[NVLINK|PCI][Ring], "
    "LL bus bandwidth x 1/4 for all-reduce, LL128 x 0.92 and NVLink only; "
    "ncclTopoGetAlgoTime: time = latency + bytes / algorithm bandwidth)"
)


@dataclass(frozen=True, kw_only=True)
class NcclProtocol:
    """One NCCL protocol of the ring all-reduce: fixed latency, latency per ring step on each
    link kind (None: not used on that link), and the share of the bus bandwidth it reaches."""

    name: str
    base_latency_s: float
    hop_latency_s: dict[LinkKind, float | None]
    bandwidth_share: float


# NCCL's ring figures for one node (src/graph/tuning.cc, baseLat and hwLat, in microseconds).
NCCL_RING_PROTOCOLS: tuple[NcclProtocol, ...] = (
    NcclProtocol(name="LL", base_latency_s=3.6e-6,
                 hop_latency_s={"nvlink": 0.47e-6, "pcie": 1.0e-6}, bandwidth_share=0.25),
    NcclProtocol(name="LL128", base_latency_s=10.0e-6,
                 hop_latency_s={"nvlink": 1.9e-6, "pcie": None}, bandwidth_share=0.92),
    NcclProtocol(name="Simple", base_latency_s=8.4e-6,
                 hop_latency_s={"nvlink": 3.4e-6, "pcie": 5.7e-6}, bandwidth_share=1.0),
)  # fmt: skip


@dataclass(frozen=True)
class TpLink:
    """A link all-reduces cross: per-GPU bus bandwidth one way, latency per ring hop."""

    name: str
    bandwidth_bytes_per_s: float
    hop_latency_s: float
    source: str


TP_LINKS: dict[str, TpLink] = {
    "nvlink": TpLink(
        "nvlink",
        360e9,
        1.5e-6,
        "NVLink 4 (H100/H200 SXM): 450 GB/s one way per GPU, about 80 % of it as NCCL bus "
        "bandwidth; about 1.5 us per ring hop",
    ),
    "pcie": TpLink(
        "pcie",
        25e9,
        5e-6,
        "PCIe Gen4 x16 (L40S, A10, A100 PCIe): 32 GB/s one way, about 80 % of it usable; "
        "about 5 us per ring hop",
    ),
}
DEFAULT_LINK = TP_LINKS["pcie"]


def allreduce_latency_s(hop_latency_s: float, tp: int) -> float:
    """Fixed time of one ring all-reduce over `tp` GPUs: 2 (tp - 1) hops."""
    return 2.0 * (tp - 1) * hop_latency_s


def ring_share(tp: int) -> float:
    """Share of the message each GPU's link carries in a ring all-reduce: 2 (tp - 1) / tp."""
    return 2.0 * (tp - 1) / tp


@dataclass(frozen=True)
class AllReduceCost:
    """One all-reduce's time as the quickest of a few lines `latency_s + bytes x s_per_byte`
    (one per protocol), for a fixed link and GPU count."""

    lines: tuple[tuple[float, float], ...]

    def time_s(self, message_bytes: float) -> float:
        """Seconds for one all-reduce of `message_bytes`."""
        return min(lat + message_bytes * per_byte for lat, per_byte in self.lines)


def nccl_allreduce(kind: LinkKind, bus_bandwidth_bytes_per_s: float, tp: int) -> AllReduceCost:
    """NCCL's ring all-reduce cost over `tp` GPUs on a link of `kind` with this bus bandwidth
    (one way per GPU): one line per protocol the link supports (see the module docstring)."""
    steps = 2 * (tp - 1)
    lines = []
    for p in NCCL_RING_PROTOCOLS:
        hop = p.hop_latency_s[kind]
        if hop is None:
            continue
        algorithm_bw = bus_bandwidth_bytes_per_s * p.bandwidth_share * tp / steps
        lines.append((p.base_latency_s + steps * hop, 1.0 / algorithm_bw))
    return AllReduceCost(tuple(lines))


def fixed_allreduce(latency_s: float, bandwidth_bytes_per_s: float, tp: int) -> AllReduceCost:
    """An all-reduce with one fixed latency and the ring's share of the bytes over a link of
    this bandwidth (a forced link, or a calibrated hop latency)."""
    return AllReduceCost(((latency_s, ring_share(tp) / bandwidth_bytes_per_s),))


@dataclass(frozen=True, kw_only=True)
class PointToPoint:
    """One send between two GPUs (pipeline stages): a fixed latency and the bytes over the
    link's one-way bandwidth."""

    latency_s: float
    bandwidth_bytes_per_s: float

    def time_s(self, message_bytes: float) -> float:
        """Seconds to send `message_bytes`."""
        return self.latency_s + message_bytes / self.bandwidth_bytes_per_s
