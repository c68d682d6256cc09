"""The emulator's front end in real time: event-loop rounds and a one-at-a-time thread."""

from __future__ import annotations

import asyncio

from planner.emulator.frontend import FrontEndThread
from planner.engine import build_engine_config

WORK_S = 0.02


async def _leave_times(handover: str, starts: list[float]) -> list[float]:
    """When each of len(starts) requests (started at those offsets) leaves the front end."""
    config = build_engine_config("H100-80GB", "llama-3.1-8b", engine="vllm@0.6").model_copy(
        update={
            "frontend_s": 0.0,
            "frontend_s_per_prompt_token": 0.0,
            "frontend_s_per_request": WORK_S,
            "frontend_handover": handover,
        }
    )
    front = FrontEndThread(config, speed=1.0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def one(start: float) -> float:
        await asyncio.sleep(start)
        await front.pass_through(100)
        return loop.time() - t0

    return list(await asyncio.gather(*(one(s) for s in starts)))


def test_a_burst_leaves_together_after_the_round_and_one_by_one_without_rounds() -> None:
    """Five requests at once: in rounds all leave together, no sooner than five
    requests' work; one at a time, the first leaves after one request's work. Fails if the
    round releases a request before its end."""
    rounds = asyncio.run(_leave_times("round", [0.0] * 5))
    assert max(rounds) - min(rounds) < WORK_S / 2 and min(rounds) >= 5 * WORK_S
    each = asyncio.run(_leave_times("each", [0.0] * 5))
    assert min(each) < 2 * WORK_S and max(each) >= 5 * WORK_S


def test_a_request_arriving_during_a_round_waits_for_the_next() -> None:
    # r0 starts a round alone; r1 arrives during it and leaves after a round of its own.
    first, second = asyncio.run(_leave_times("round", [0.0, WORK_S / 2]))
    assert WORK_S <= first < second
    assert second >= 2 * WORK_S
