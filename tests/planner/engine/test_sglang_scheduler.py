"""SGLang's scheduler as the `sglang` profile runs it: a waiting request joins only while its
prompt and max_tokens fit the free KV less a share of the running requests' tokens to come
(python/sglang/srt/managers/schedule_policy.py, PrefillAdder), and a prompt longer than the
chunk goes on chunk by chunk in prefill steps of its own. The expected figures are written
out from SGLang's rule and its environ.py defaults, not computed by capplan's code."""

from __future__ import annotations

from typing import Any

from planner.engine import Engine, EngineRequest, build_engine_config
from testkit.engine_configs import NO_FRONT_END

# SGLang's defaults: SGLANG_INIT_NEW_TOKEN_RATIO 0.7, times SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
# 0.14 after SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600 decode steps.
INIT, LOW = 0.7, 0.7 * 0.14


def _engine(**kw: Any) -> Engine:
    # About 4,500 tokens of KV cache for Llama-3.1-8B on one H100 (0.2: about 7,900).
    kw.setdefault("gpu_memory_utilization", 0.195)
    config = build_engine_config("H100-80GB", "llama-3.1-8b", engine="sglang", **NO_FRONT_END, **kw)
    return Engine(config, token_events=False)


def _free_tokens(engine: Engine) -> int:
    g = engine.gauges()
    return (g.kv_total_blocks - g.kv_used_blocks) * engine.config.block_tokens


def _joins_after(
    decode_steps: int, out_b: int, out_a: int = 3001, prompt_b: int = 200, **kw: Any
) -> tuple[bool, int]:
    """Whether a `prompt_b`-token prompt asking `out_b` tokens joins a running request (160-token
    prompt, `out_a` tokens asked) after its prefill and `decode_steps` decode steps, and the
    KV tokens the rule leaves it then: free less the share of the running one's tokens to
    come (out_a - 1 - decode_steps, clipped at 4,096), at the share SGLang has after that many
    decode steps."""
    engine = _engine(**kw)
    engine.add_request(EngineRequest("a", 160, out_a, 0.0), 0.0)
    now = 0.0
    for _ in range(1 + decode_steps):
        now = engine.step(now).end_s
    ratio = max(INIT - decode_steps * (INIT - LOW) / 600, LOW)
    room = int(_free_tokens(engine) - ratio * min(out_a - 1 - decode_steps, 4096))
    engine.add_request(EngineRequest("b", prompt_b, out_b, now), now)
    return engine.step(now).prefill_tokens == prompt_b, room


def test_a_request_joins_while_its_prompt_and_output_fit_the_reserve() -> None:
    """Right after the first request's prefill the share is 0.7: a newcomer asking one token
    less than the room joins, one asking one more waits (its prompt blocks would fit)."""
    _, room = _joins_after(0, 1)
    assert 2000 < room < 3000, room  # the share holds back 2,100 of about 4,300 tokens
    assert _joins_after(0, room - 200 - 1)[0]
    assert not _joins_after(0, room - 200 + 1)[0]
    # Without the reserve (vLLM's admission) the same request joins at once.
    assert _joins_after(0, room - 200 + 1, admission_reserve=False)[0]


def test_a_running_request_counts_at_most_4096_tokens_to_come() -> None:
    """One asking 6,001 tokens holds back 0.7 x 4,096, not 0.7 x 6,000."""
    kw = {"out_a": 6001, "prompt_b": 1000, "gpu_memory_utilization": 0.2}
    _, room = _joins_after(0, 1, **kw)
    assert 4000 < room < 6000, room
    assert _joins_after(0, room - 1000 - 1, **kw)[0]
    assert not _joins_after(0, room - 1000 + 1, **kw)[0]


def test_the_share_falls_to_its_floor_over_600_decode_steps() -> None:
    """After 700 decode steps the share is 0.098, halfway (300) 0.399: the room a newcomer
    gets is what that share leaves."""
    for steps in (700, 300):
        _, room = _joins_after(steps, 1)
        assert _joins_after(steps, room - 200 - 1)[0], steps
        assert not _joins_after(steps, room - 200 + 1)[0], steps


def test_a_long_prompt_goes_on_chunk_by_chunk_before_the_decodes() -> None:
    """A 20,000-token prompt under SGLang's 8,192-token chunk: its three chunks run in three
    steps with no decode in them (the chunked request leads each prefill batch), while vLLM V1
    mixes its later chunks with the running decodes."""
    for engine_name, decodes_with_chunks in (("sglang", 0), ("vllm", 4)):
        config = build_engine_config(
            "H100-80GB", "llama-3.1-8b", engine=engine_name, **NO_FRONT_END
        )
        engine = Engine(config, token_events=False)
        for i in range(4):
            engine.add_request(EngineRequest(f"d{i}", 64, 200, 0.0), 0.0)
        now = 0.0
        for _ in range(3):
            now = engine.step(now).end_s
        engine.add_request(EngineRequest("long", 20000, 5, now), now)
        chunks = []
        while sum(c for c, _ in chunks) < 20000:
            res = engine.step(now)
            now = res.end_s
            if res.prefill_tokens:
                chunks.append((res.prefill_tokens, res.decode_tokens))
        if engine_name == "sglang":
            assert [c for c, _ in chunks] == [8192, 8192, 3616]
        assert {d for _, d in chunks[1:]} == {decodes_with_chunks}, (engine_name, chunks)


def _joins_after_idle(out_b: int) -> tuple[bool, int]:
    """`_joins_after(0, out_b)` once a request has run 800 decode steps (the share at its
    floor), finished, and the engine has idled a second."""
    engine = _engine()
    engine.add_request(EngineRequest("warm", 160, 801, 0.0), 0.0)
    now = 0.0
    while engine.has_work():
        now = engine.step(now).end_s
    now += 1.0
    engine.add_request(EngineRequest("a", 160, 3001, now), now)
    now = engine.step(now).end_s
    room = int(_free_tokens(engine) - INIT * 3000)
    engine.add_request(EngineRequest("b", 200, out_b, now), now)
    return engine.step(now).prefill_tokens == 200, room


def test_the_share_starts_again_when_the_engine_idles() -> None:
    """After the engine idles, the next pair meets the share of 0.7 again."""
    _, room = _joins_after_idle(1)
    assert _joins_after_idle(room - 200 - 1)[0]
    assert not _joins_after_idle(room - 200 + 1)[0]


def test_after_a_preemption_the_share_is_what_the_running_requests_decoded() -> None:
    """When decodes outgrow the KV cache and the newest is preempted, the share becomes
    (tokens decoded + 20 each) / (tokens asked + 1) of the requests still running, at most 1
    (schedule_batch.py retract_decode)."""
    engine = _engine()
    for i in range(6):  # the floor lets all six in; together they outgrow the cache
        engine.add_request(EngineRequest(f"r{i}", 100, 1500, 0.0), 0.0)
    now, preempted = 0.0, False
    while engine.has_work() and not preempted:
        res = engine.step(now)
        now = res.end_s
        preempted = any(e.kind == "preempted" for e in res.events)
    assert preempted
    running = [t for t in engine.timelines().values() if t.first_token_s and t.finished_s is None]
    running = [t for t in running if engine.timeline(t.request_id).preemptions == 0]
    # Their tokens before the step that preempted (it gave each one more).
    decoded = sum(t.output_tokens - 1 for t in running) + 20 * len(running)
    expected = min(1.0, decoded / (1500 * len(running) + 1))
    steps = engine._decode_steps
    assert engine._admission.new_token_ratio(steps) == expected
