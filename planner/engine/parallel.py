"""Tensor parallelism: the link a board's all-reduces cross, and what one all-reduce costs.

A tensor-parallel step does two all-reduces of each token's hidden state per layer. A ring
all-reduce over `tp` GPUs takes 2 (tp - 1) sequential hops, so its latency grows with the
GPU count, and moves 2 (tp - 1) / tp of the message through each GPU's link. Each board's
link (bus bandwidth one way, latency per hop) is in the catalog (`catalog.yaml`); a board
without one is taken as PCIe. `TP_LINKS` names links a what-if can force (`--tp-link`).
"""

from __future__ import annotations

from dataclasses import dataclass


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
