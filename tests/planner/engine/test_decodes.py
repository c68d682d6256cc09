"""The running decodes' aggregate (planner.engine.decodes) changes nothing: every step, timeline,
gauge and fleet run is the one scheduling each request on its own gives, to the bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from planner.engine import Engine, EngineConfig, EngineRequest, build_engine_config
from planner.engine import admission as admission_module
from planner.engine import engine as engine_module
from planner.engine.decodes import Decodes
from planner.fleet.sim import FleetSimulation
from planner.fleet.traffic import profile_requests
from profiles.presets import preset_profile
from profiles.tokenize import chained_block_hashes


def _h100(**overrides: Any) -> EngineConfig:
    return build_engine_config("H100-80GB", "llama-3.1-8b", **overrides)


CONFIGS: dict[str, dict[str, Any]] = {
    "roomy": {},
    # ~24k tokens of KV cache: decodes outgrow it, are preempted, cached blocks are evicted.
    "preempting": {"gpu_memory_utilization": 0.25},
    # A budget that prompts often overrun: the aggregate must give way to admission order.
    "small budget": {"gpu_memory_utilization": 0.25, "max_num_batched_tokens": 300},
    "request reservation": {"gpu_memory_utilization": 0.3, "kv_reservation": "request"},
    "static reservation": {"gpu_memory_utilization": 0.5, "kv_reservation": "static"},
    "prefill first": {"gpu_memory_utilization": 0.25, "prefill_first": True},
    # SGLang's admission reserve (running requests' tokens to come, read from the aggregate)
    # and chunks that go on alone; CLIP_NEW_TOKENS lowered to 100 by the test.
    "admission reserve": {
        "gpu_memory_utilization": 0.25,
        "prefill_first": True,
        "admission_reserve": True,
        "max_num_batched_tokens": 512,
    },
}


def _requests(n: int, seed: int) -> list[EngineRequest]:
    """Seeded requests, a third of them sharing a 640-token prefix (the prefix cache)."""
    rng = np.random.default_rng(seed)
    common = rng.integers(0, 2**31, size=640)
    reqs, at = [], 0.0
    for i in range(n):
        ids = rng.integers(0, 2**31, size=int(rng.integers(20, 1200)))
        if i % 3 == 0:
            ids = np.concatenate([common, ids])
        hashes = tuple(chained_block_hashes(ids, 16))
        reqs.append(EngineRequest(f"r{i}", len(ids), int(rng.integers(1, 500)), at, hashes))
        at += float(rng.exponential(0.03))
    return reqs


def _stepped(config: EngineConfig, requests: list[EngineRequest]) -> list[Any]:
    """Every step's result, a live request's timeline now and then, the gauges, a decoding
    request aborted and every timeline at the end, stepping one engine as `simulate` does."""
    engine = Engine(config, token_events=False)
    seen: list[Any] = []
    now, k, step = 0.0, 0, 0
    aborted = False
    while k < len(requests) or engine.has_work():
        if not engine.has_work():
            now = max(now, requests[k].arrival_s)
        while k < len(requests) and requests[k].arrival_s <= now:
            engine.add_request(requests[k], now)
            k += 1
        result = engine.step(now)
        seen.append(result)
        step += 1
        if step % 13 == 0 and k:
            tl = engine.timeline(requests[k - 1].request_id)
            seen.append((tl.output_tokens, tl.last_token_s, tl.first_token_s, tl.finished_s))
        if step % 29 == 0:
            seen.append(engine.gauges())
        if step >= 400 and not aborted:  # the first request decoding from then goes
            tls = (engine.timeline(r.request_id) for r in requests[:k])
            gone = next((t for t in tls if t.first_token_s and t.finished_s is None), None)
            if gone is not None:
                engine.abort(gone.request_id, result.end_s)
                aborted = True
        now = result.end_s
        if result.duration_s == 0:
            if k == len(requests):
                break
            now = max(now, requests[k].arrival_s)
    return [*seen, engine.gauges(), *engine.timelines().values()]


def _alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on no request joins the aggregate: each is scheduled on its own."""
    monkeypatch.setattr(Decodes, "qualifies", staticmethod(lambda r: False))


def _count(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count the calls of Decodes.`name` (the list's one item)."""
    calls = [0]
    method = getattr(Decodes, name)

    def counted(self: Decodes, *args: Any) -> Any:
        calls[0] += 1
        return method(self, *args)

    monkeypatch.setattr(Decodes, name, counted)
    return calls


@pytest.mark.parametrize("name", CONFIGS)
def test_the_aggregate_steps_as_each_request_on_its_own(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Steps, timelines read mid-way, gauges and an abort, with and without the aggregate,
    under preemption, an overrun budget, reservations and prefill-first scheduling."""
    config = _h100(**CONFIGS[name]).model_copy(update={"record_token_times": False})
    requests = _requests(500, 3)
    if name == "admission reserve":  # members past the clip, counted one by one
        monkeypatch.setattr(engine_module, "CLIP_NEW_TOKENS", 100)
        monkeypatch.setattr(admission_module, "CLIP_NEW_TOKENS", 100)
    joins = _count(monkeypatch, "join")
    dissolves = _count(monkeypatch, "dissolve")
    together = _stepped(config, requests)
    assert joins[0] > 300 and dissolves[0] > 0, (joins, dissolves)
    _alone(monkeypatch)
    assert _stepped(config, requests) == together
    if name in ("preempting", "small budget"):
        assert together[-len(requests) - 1].num_preemptions > 0


@pytest.mark.parametrize(("kv", "instances"), [(None, 2), (0.25, 1)])
def test_a_paused_and_forked_fleet_run_is_the_one_without_the_aggregate(
    kv: float | None, instances: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet run paused every 2.5 s and read (so decode runs are applied, then cut back when
    a request arrives), and a copy of it taking fewer arrivals, are the runs of engines
    scheduling every request on its own (so of engines without decode runs: the blocks a
    run cut back grew into stay taken, and are used when its steps are taken again)."""
    update = {"record_token_times": False}
    config = _h100(**({} if kv is None else {"gpu_memory_utilization": kv})).model_copy(
        update=update
    )
    requests = profile_requests(
        preset_profile("chat"), 6.0, 60.0, np.random.default_rng(7),
        config.effective_max_model_len, block_tokens=config.block_tokens,
    )  # fmt: skip

    def run() -> list[np.ndarray]:
        sim = FleetSimulation(requests, config, instances)
        seen = []
        for until in np.arange(2.5, 80.0, 2.5):
            sim.advance(float(until))
            seen.append(sim.run(sim.k).e2e_s.copy())
            if until == 30.0:
                copy = sim.fork(sim.k + 20)
                copy.advance()
                seen.append(copy.run().ttft_s.copy())
        sim.advance()
        last = sim.run()
        return [*seen, last.ttft_s, last.tpot_s, np.array([last.steps, last.simulated_s])]

    rewinds = _count(monkeypatch, "rewind")
    together = run()
    assert rewinds[0] > 0
    _alone(monkeypatch)
    alone = run()
    assert len(alone) == len(together)
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a, b)
