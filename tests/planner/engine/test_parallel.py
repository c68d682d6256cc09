"""Tensor parallelism's all-reduce cost: NCCL's ring model by link kind, as the engine uses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from contracts.errors import InputError
from planner.engine import build_engine_config
from planner.engine.build import EFFICIENCY_PATH
from planner.engine.catalog import gpu_catalog
from planner.engine.parallel import nccl_allreduce
from planner.engine.roofline import Roofline, tp_allreduce


def test_small_all_reduce_pays_nccl_ll_latency_that_grows_with_gpu_count() -> None:
    # NCCL's LL ring on NVLink: 3.6 us + 2 (tp - 1) x 0.47 us; 16 bytes cost next to nothing.
    for tp in (2, 4, 8):
        cost = nccl_allreduce("nvlink", 360e9, tp)
        assert cost.time_s(16) == pytest.approx((3.6 + 2 * (tp - 1) * 0.47) * 1e-6, rel=1e-3)
    assert nccl_allreduce("nvlink", 360e9, 8).time_s(16) > nccl_allreduce(
        "nvlink", 360e9, 2
    ).time_s(16)


def test_large_all_reduce_moves_the_ring_share_at_full_bus_bandwidth() -> None:
    # 1 GB over 8 GPUs: Simple wins, 2 x 7 / 8 of the bytes over 360 GB/s plus its latency.
    cost = nccl_allreduce("nvlink", 360e9, 8)
    want = 8.4e-6 + 14 * 3.4e-6 + 1e9 * 14 / 8 / 360e9
    assert cost.time_s(1e9) == pytest.approx(want, rel=1e-6)


def test_pcie_has_no_ll128_and_slower_hops() -> None:
    assert len(nccl_allreduce("pcie", 25e9, 4).lines) == 2
    assert nccl_allreduce("pcie", 25e9, 4).time_s(16) > nccl_allreduce("nvlink", 25e9, 4).time_s(16)


def test_pcie_all_reduce_costs_more_than_nvlink_for_the_same_bytes() -> None:
    """Same bus bandwidth, same GPU count: NCCL's PCIe ring (no LL128, slower hops) takes
    longer than its NVLink ring for a tiny message, a decode step's (256 tokens x 8192 x 2
    bytes) and a prefill's (8192 tokens). Fails if the link kind stops mattering."""
    for tp in (2, 4, 8):
        pcie, nvlink = nccl_allreduce("pcie", 25e9, tp), nccl_allreduce("nvlink", 25e9, tp)
        for message in (16, 256 * 8192 * 2, 8192 * 8192 * 2):
            assert pcie.time_s(message) > nvlink.time_s(message)


def test_l40s_reads_its_fitted_factors_and_its_all_reduces_reach_the_fitted_pcie_share() -> None:
    """The L40S's factors fitted on published rows (efficiency.yaml: mfu, mbu, the share of
    the PCIe bus bandwidth its all-reduces reach, and the H100's tp_shard_efficiency) are
    what a configuration gets, and the all-reduce of a 256-token decode step over PCIe costs
    more with that share than at the full bus bandwidth. Fails if the L40S's factors or the
    link share stop being read (tp_link_efficiency left out of the fitted fields)."""
    fitted = yaml.safe_load(EFFICIENCY_PATH.read_text(encoding="utf-8"))["gpus"]["L40S-48GB"]
    config = build_engine_config("L40S-48GB", "llama-3.1-70b", tp=4, engine="trtllm")
    assert config.gpu.link_kind == "pcie"
    for field in ("mfu", "mbu", "tp_link_efficiency", "tp_shard_efficiency"):
        assert getattr(config, field) == fitted[field], field
    assert fitted["fitted_on"]["tp_shard_efficiency"] == "H100-80GB's"
    assert 0.3 < config.tp_link_efficiency < 1.0
    message = 256 * 8192 * 2
    full = tp_allreduce(config.model_copy(update={"tp_link_efficiency": 1.0}))
    shared = tp_allreduce(config)
    assert full is not None and shared is not None
    assert shared.time_s(message) > 1.2 * full.time_s(message)


def test_nvlink_boards_use_the_nccl_model_and_tp_costs_more_per_gpu_as_it_grows() -> None:
    steps = {}
    for tp in (2, 4, 8):
        config = build_engine_config("H100-80GB", "llama-3.1-70b", tp=tp, engine="trtllm")
        assert config.gpu.link_kind == "nvlink"
        roof = Roofline(config)
        # One decode step of 64 requests, and the same step with all-reduces for free.
        free = Roofline(config.model_copy(update={"tp_link_bandwidth_bytes_per_s": 1e30}))
        steps[tp] = roof.step_time_s(64, 0, 0, seqs=64) - free.step_time_s(64, 0, 0, seqs=64)
    # 160 all-reduces of 64 x 8192 x 2 bytes: LL128 at tp 8, microseconds each.
    assert steps[2] < steps[4] < steps[8] < 160 * 60e-6


def test_catalog_link_kind_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "cat.json"
    gpu = {"memory_bytes": 1e10, "hbm_bandwidth_bytes_per_s": 1e12, "bf16_flops": 1e14}
    path.write_text(json.dumps({"gpus": {"X": {**gpu, "link_kind": "infiniband"}}}))
    with pytest.raises(InputError, match=r"gpus.X.link_kind: expected one of nvlink, pcie"):
        gpu_catalog(path)
    path.write_text(json.dumps({"gpus": {"X": {**gpu, "link_kind": "nvlink"}}}))
    assert gpu_catalog(path)["X"].link_kind == "nvlink"


def test_an_nvlink_bridge_joins_two_boards_and_a_larger_group_crosses_pcie() -> None:
    """H100 NVL boards are bridged in pairs (catalog link_gpus: 2): a tp 2 group all-reduces
    over the bridge's NVLink, a tp 4 group's ring crosses PCIe Gen5 between the pairs, and
    costs several times the SXM board's NVSwitch all-reduce at tp 4. Fails if the group size
    is ignored (the tp 4 ring priced as NVLink)."""
    message = 64 * 8192 * 2  # one decode step of 64 requests, Llama-70B's hidden size
    nvl2 = build_engine_config("NVIDIA H100 NVL", "llama-3.1-70b", tp=2, engine="trtllm")
    nvl4 = build_engine_config("NVIDIA H100 NVL", "llama-3.1-70b", tp=4, engine="trtllm")
    sxm4 = build_engine_config("NVIDIA H100 80GB HBM3", "llama-3.1-70b", tp=4, engine="trtllm")
    assert (nvl2.gpu.link_gpus, nvl2.gpu.link_kind) == (2, "nvlink")
    two, four, switched = tp_allreduce(nvl2), tp_allreduce(nvl4), tp_allreduce(sxm4)
    assert two is not None and four is not None and switched is not None
    bridge = nccl_allreduce("nvlink", 240e9 * nvl2.tp_link_efficiency, 2)
    pcie = nccl_allreduce("pcie", 51.2e9 * nvl4.tp_link_efficiency, 4)
    assert two.time_s(message) == pytest.approx(bridge.time_s(message))
    assert four.time_s(message) == pytest.approx(pcie.time_s(message))
    assert four.time_s(message) > 3 * switched.time_s(message)


def test_boards_without_a_published_row_take_their_dies_factors() -> None:
    """H100 NVL and PCIe boards have no published row: they take the H100's fitted factors
    (same die), the PCIe board also the L40S's share of the PCIe bus; their peaks, memory
    and links are their own. Fails if a board falls back to the unfitted defaults."""
    fitted = yaml.safe_load(EFFICIENCY_PATH.read_text(encoding="utf-8"))["gpus"]
    sxm = build_engine_config("H100-80GB", "llama-3.1-8b", engine="trtllm")
    for name in ("NVIDIA H100 NVL", "NVIDIA H100 PCIe", "NVIDIA H200 NVL"):
        board = build_engine_config(name, "llama-3.1-8b", engine="trtllm")
        for field in ("mfu", "mbu", "fp8_efficiency", "tp_shard_efficiency"):
            assert getattr(board, field) == getattr(sxm, field), (name, field)
        assert board.gpu.bf16_flops < sxm.gpu.bf16_flops  # its own (lower) clocks
    pcie = build_engine_config("NVIDIA H100 PCIe", "llama-3.1-8b", engine="trtllm")
    assert pcie.tp_link_efficiency == fitted["L40S-48GB"]["tp_link_efficiency"]
    a100 = build_engine_config("NVIDIA A100 80GB PCIe", "llama-3.1-8b", engine="trtllm")
    assert (a100.mfu, a100.mbu) == (fitted["A100-80GB"]["mfu"], fitted["A100-80GB"]["mbu"])


def test_catalog_link_gpus_is_a_whole_number(tmp_path: Path) -> None:
    path = tmp_path / "cat.json"
    gpu = {"memory_bytes": 1e10, "hbm_bandwidth_bytes_per_s": 1e12, "bf16_flops": 1e14}
    path.write_text(json.dumps({"gpus": {"X": {**gpu, "link_gpus": 1.5}}}))
    with pytest.raises(InputError, match=r"gpus.X.link_gpus: expected a whole number"):
        gpu_catalog(path)
    path.write_text(json.dumps({"gpus": {"X": {**gpu, "link_gpus": 2}}}))
    assert gpu_catalog(path)["X"].link_gpus == 2
