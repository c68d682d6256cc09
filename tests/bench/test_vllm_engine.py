"""testkit/vllm_engine.py without vLLM: its safetensors file read back by hand (no torch
here), and the stop of a server's whole process group."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from testkit.vllm_engine import VllmServer, bfloat16_bits, write_safetensors
from tests.helpers.process_group import group_ended, live_in_group


def _read(path: Path) -> tuple[int, dict[str, dict[str, object]], bytes]:
    """(header length, header, data) of a safetensors file."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    return size, json.loads(raw[8 : 8 + size]), raw[8 + size :]


def test_bfloat16_rounds_to_nearest_even() -> None:
    # 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0);
    # 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6
    values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 0.0], dtype=np.float32)
    back = (bfloat16_bits(values).astype(np.uint32) << 16).view(np.float32)
    assert back.tolist() == [1.0, 1.0, 1 + 2**-6, -2.5, 0.0]


def test_safetensors_header_offsets_and_bytes(tmp_path: Path) -> None:
    weights = (np.arange(12, dtype=np.float32).reshape(3, 4) / 7).astype(np.float16)
    norm = np.ones(5, dtype=np.float32)
    path = write_safetensors(
        tmp_path / "m.safetensors", {"w": bfloat16_bits(weights), "n": norm, "h": weights}
    )
    size, header, data = _read(path)
    assert header == {
        "w": {"dtype": "BF16", "shape": [3, 4], "data_offsets": [0, 24]},
        "n": {"dtype": "F32", "shape": [5], "data_offsets": [24, 44]},
        "h": {"dtype": "F16", "shape": [3, 4], "data_offsets": [44, 68]},
    }
    assert len(data) == 68 and size % 8 == 0  # the data start 8-byte aligned
    bf16 = (np.frombuffer(data[:24], "<u2").astype(np.uint32) << 16).view(np.float32)
    assert np.allclose(bf16.reshape(3, 4), weights.astype(np.float32), rtol=2**-8)
    assert np.frombuffer(data[24:44], "<f4").tolist() == [1.0] * 5
    assert np.array_equal(np.frombuffer(data[44:68], "<f2").reshape(3, 4), weights)


def test_stop_ends_the_whole_group_a_child_that_outlives_its_parent_too() -> None:
    # a leader that dies on SIGTERM and a child that ignores it: the group's SIGKILL ends it
    child = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    leader = (
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", leader], start_new_session=True)
    end = time.monotonic() + 10
    while len(live_in_group(proc.pid)) < 2 and time.monotonic() < end:
        time.sleep(0.05)
    assert len(live_in_group(proc.pid)) == 2
    server = VllmServer(proc, 0, "none")
    server.stop()
    assert proc.returncode == -signal.SIGTERM
    assert group_ended(proc.pid)
