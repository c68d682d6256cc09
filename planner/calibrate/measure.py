"""The calibration's probe plan and its rounds: every probe once per round, rounds repeated.

Interleaving (A B C A B C, not A A B B) lets the spread of a probe's repeats measure the
server's drift over the whole calibration, not only the noise between back-to-back requests.
`drift_of` summarises it; `check_drift` refuses a calibration beyond the bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from contracts.calibration import Drift, KvCapacity
from contracts.errors import RunError
from planner.calibrate.probes import (
    CacheHits,
    Target,
    common_step_s,
    concurrent,
    random_prompt,
    stream,
)

DECODE_TOKENS = 48
MAX_PREFILL_TOKENS = 4096
MIN_ROUNDS = 3
MAX_ROUNDS = 9
DEFAULT_MAX_DRIFT = 0.25


@dataclass(frozen=True, kw_only=True)
class ProbeSpec:
    """One request shape: a prefill (one request, one token), a decode (`batch` streams of
    DECODE_TOKENS), the front end (a one-token prompt) or the prefix cache (a prompt twice)."""

    name: str
    kind: str
    prompt_tokens: int
    batch: int = 1
    held_out: bool = False


@dataclass(kw_only=True)
class Measured:
    """A probe's repeats in the order they ran (seconds), and the decode's mean context."""

    spec: ProbeSpec
    values_s: list[float] = field(default_factory=list)
    firsts_s: list[float] = field(default_factory=list)  # prefix probe: the first sending
    context_tokens: float = 0.0


def probe_plan(max_context: int, slots: int) -> list[ProbeSpec]:
    """The probes for a server whose sequences hold `max_context` tokens, `slots` at a time.

    Prefill: five lengths from 32 to min(max_context / 2, 4096), geometric; the second
    longest held out. Decode: batches 1, 2 and `slots` (at most 8) at a short (32) and a long
    context; batch 2 at the long context held out. Front end: a one-token prompt. Prefix
    cache: half the longest prefill sent twice.
    """
    top = max(64, min(max_context // 2, MAX_PREFILL_TOKENS))
    lengths = sorted({int(round(x)) for x in np.geomspace(32, top, 5)})
    specs = [
        ProbeSpec(
            name=f"prefill:{n}", kind="prefill", prompt_tokens=n, held_out=i == len(lengths) - 2
        )
        for i, n in enumerate(lengths)
    ]
    specs.append(ProbeSpec(name="frontend:1", kind="frontend", prompt_tokens=1))
    long_ctx = max(64, min(512, max_context // 2 - DECODE_TOKENS))
    for b in sorted({1, 2, max(2, min(slots, 8))}):
        for c in (32, long_ctx):
            held = b == 2 and c == long_ctx
            specs.append(
                ProbeSpec(
                    name=f"decode:b{b}:c{c}", kind="decode", prompt_tokens=c, batch=b, held_out=held
                )
            )
    specs.append(ProbeSpec(name=f"prefix:{top // 2}", kind="prefix", prompt_tokens=top // 2))
    return specs


def run_probe(target: Target, m: Measured, rng: np.random.Generator, vocab: int) -> None:
    """Measure `m`'s probe once more, appending to its repeats (fresh random prompts, so no
    repeat finds the last one in a prefix cache, except the prefix probe's second sending)."""
    spec = m.spec
    if spec.kind in ("prefill", "frontend"):
        m.values_s.append(stream(target, random_prompt(rng, spec.prompt_tokens, vocab), 1).ttft_s)
    elif spec.kind == "prefix":
        prompt = random_prompt(rng, spec.prompt_tokens, vocab)
        m.firsts_s.append(stream(target, prompt, 1).ttft_s)
        m.values_s.append(stream(target, prompt, 1).ttft_s)
    else:
        prompts = [random_prompt(rng, spec.prompt_tokens, vocab) for _ in range(spec.batch)]
        streams = concurrent(target, prompts, DECODE_TOKENS)
        m.values_s.append(common_step_s(streams))
        m.context_tokens = spec.prompt_tokens + DECODE_TOKENS / 2


def run_rounds(
    target: Target,
    specs: list[ProbeSpec],
    *,
    budget_s: float,
    vocab: int,
    rng: np.random.Generator,
    echo: Callable[[str], None] = lambda _: None,
    clock: Callable[[], float] = time.perf_counter,
    cache_hits: Callable[[], CacheHits | None] = lambda: None,
) -> list[Measured]:
    """Every probe once per round, MIN_ROUNDS to MAX_ROUNDS rounds within `budget_s` (at least
    MIN_ROUNDS whatever the budget: drift needs two repeats). A throwaway request first.

    The prefix probes run last in each round; `cache_hits` (the server's prefix-cache hit
    counter, None where it has none) is read before and after the others, and RunError is
    raised after a round in which it grew: those probes' prompts were served from the cache
    (a prompt sent before, by an earlier run with the same --seed or another client), so
    their times are not the server's prefill.
    """
    stream(target, random_prompt(rng, 8, vocab), 2)
    measured = [Measured(spec=s) for s in specs]
    measured.sort(key=lambda m: m.spec.kind == "prefix")  # stable: the others keep their order
    timed = [m for m in measured if m.spec.kind != "prefix"]
    start = clock()
    for r in range(MAX_ROUNDS):
        t0 = clock()
        before = cache_hits()
        for m in timed:
            run_probe(target, m, rng, vocab)
        check_cache(before, cache_hits())
        for m in measured[len(timed) :]:
            run_probe(target, m, rng, vocab)
        took = clock() - t0
        echo(f"round {r + 1}: {len(specs)} probes in {took:.1f} s")
        if r + 1 >= MIN_ROUNDS and clock() - start + took > budget_s:
            break
    return measured


def check_cache(before: CacheHits | None, after: CacheHits | None) -> None:
    """RunError when the prefix-cache hit counter grew between the two readings."""
    if before is None or after is None or after.metric != before.metric:
        return
    grew = after.tokens - before.tokens
    if grew > 0:
        raise RunError(
            f"calibration refused: the server's prefix cache served {grew:.0f} prompt tokens "
            f"of the prefill and decode probes ({after.metric} grew), so their times are not "
            f"the server's prefill. The prompts were sent before (an earlier calibration "
            f"with the same --seed, or another client): rerun without --seed (each run "
            f"draws fresh prompts), or restart the server"
        )


def spread(values: list[float]) -> float:
    """Median absolute deviation / median of a probe's repeats: how far a typical repeat is
    from the probe's median (a stray slow repeat, another process's burst, moves it little)."""
    med = float(np.median(values))
    return float(np.median(np.abs(np.asarray(values) - med))) / med if med > 0 else 0.0


def trend(values: list[float]) -> float:
    """Median of the later half of the repeats / median of the earlier half - 1."""
    half = len(values) // 2
    early, late = float(np.median(values[:half])), float(np.median(values[-half:]))
    return late / early - 1 if early > 0 else 0.0


def drift_of(measured: list[Measured], bound: float) -> Drift:
    """The spread of every timed probe (prefix probes aside) and their median trend from the
    earlier rounds to the later ones."""
    timed = [m for m in measured if m.spec.kind != "prefix" and len(m.values_s) >= 2]
    if not timed:
        raise RunError("no probe was repeated: drift cannot be measured")
    spreads = [spread(m.values_s) for m in timed]
    worst = int(np.argmax(spreads))
    trends = [trend(m.values_s) for m in timed]
    return Drift(
        bound=bound,
        rounds=min(len(m.values_s) for m in timed),
        median_spread=float(np.median(spreads)),
        worst_spread=spreads[worst],
        worst_probe=timed[worst].spec.name,
        trend=float(np.median(trends)),
    )


def check_drift(drift: Drift) -> None:
    """RunError (no calibration written) when the repeats disagree beyond the bound."""
    if drift.median_spread > drift.bound or abs(drift.trend) > drift.bound:
        raise RunError(
            f"calibration refused: the probes' repeats disagree by a median "
            f"{drift.median_spread:.0%} (worst {drift.worst_spread:.0%}, {drift.worst_probe}) "
            f"and moved {drift.trend:+.0%} from the earlier rounds to the later; bound "
            f"{drift.bound:.0%}. "
            f"The server's speed changed while it was measured (other load, throttling): "
            f"rerun on a quiet server, or raise --max-drift knowingly"
        )


def kv_slots(kv: KvCapacity, default: int) -> int:
    """Sequences the server runs at once: its slots where it reports them, else `default`."""
    return kv.slots or default
