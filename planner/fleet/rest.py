"""The rest of a least-outstanding fleet, around the few instances the shortcut simulates.

A sub-fleet of k instances fed a fixed k/n of the arrivals balances its load among k
instances only: a long request's backlog stays on them, where n instances under
least-outstanding would have sent the next arrivals elsewhere. The sub-fleet's p95s are then
above the whole fleet's (on the chat preset at 400 req/s, n = 42: TTFT p95 +9 % with k = 4
over 300 s, +14 % with k = 8 over 100 s; modelled as below, +0.1 % and +2.6 %).
`RestOfFleet` routes every arrival of the whole fleet instead, among the k simulated
instances and the n - k others, modelled by their number of requests in flight alone: under
least-outstanding with many instances every instance holds the fleet's mean load, to a
request (the mean-field limit of join-the-shortest-queue), so the others' mean is all the
router needs of them.

- An arrival goes to the least-loaded simulated instance when that one holds fewer requests
  than the others' least-loaded (who hold the floor or the ceiling of their mean); to the
  others when it holds more; on a tie, to the simulated instance in proportion to the tied
  instances it is one of (an error-diffusion counter: deterministic, the share exact over
  many ties).
- The others finish their requests one at a time, a Poisson process at the rate per request
  in flight the simulated instances finish theirs, smoothed over `SMOOTHING_S` (their
  completions are k instances' noise, not the fleet's). Drawn, not drained as a fluid: the
  whole fleet's load swings with its completions as with its arrivals. (At n = 42 a fluid
  measured as well; at n = 16-24 over too few requests to settle it, 2,300-3,500, both came
  out 4-10 % low: `CHANGELOG.md`.)

The simulated instances thus take their share of the arrivals when they have room, as the
whole fleet's do, and their requests are shaped in arrival order (the stream's shapes in
order, as a sub-fleet's are: `planner.fleet.traffic.Traffic.sub_requests`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from planner.engine import EngineRequest
from planner.fleet.routing import least_loaded

# The time constant of the others' completion rate: long enough to carry the fleet's rate,
# not the k simulated instances' noise; short enough to follow the rate down as batches grow
# in a burst (a lagging rate drains the others too fast, and the simulated instances take
# too little of the burst). `python bench/fleet_rest_tuning.py` (chat preset, 400 req/s,
# 300 s, k = 8, n = 41-43, seeds 0 and 1; TTFT and TPOT p95 against the full fleet): at 3 s
# -4.3 % to +1.1 %; at 1 s -1.7 % to +2.9 %; at 0.5 s -1.4 % to +3.5 %. (Drained as a fluid
# with k = 4: 1 s +5.0 %.)
SMOOTHING_S = 1.0
GAPS = 4096  # exponential gaps drawn at a time
ELSEWHERE = -1  # `RestOfFleet.next_taken`'s answer when the others took every arrival


class RestOfFleet:
    """Every arrival of an `instances`-strong least-outstanding fleet, of which `simulated`
    are simulated (see the module). `arrival_s`: the whole fleet's arrival times, sorted;
    `make_request(number, arrival_s)`: the engine request of an arrival routed to a
    simulated instance, called in arrival order."""

    def __init__(
        self,
        arrival_s: np.ndarray,
        instances: int,
        simulated: int,
        make_request: Callable[[int, float], EngineRequest],
        rng: np.random.Generator,
    ) -> None:
        if not 0 < simulated < instances:
            raise ValueError(f"{simulated} simulated of {instances} instances")
        self.arrival_s = arrival_s
        self._arrival: list[float] = arrival_s.tolist()
        self.instances = instances
        self.simulated = simulated
        self.make_request = make_request
        self._others = instances - simulated
        self._load = 0.0  # requests in flight on the others, in all
        self._done = 0.0  # the simulated instances' completions, smoothed
        self._exposure = 0.0  # their requests in flight x seconds, smoothed
        self._held = 0  # requests in flight on the simulated instances after the last arrival
        self._last_s = 0.0  # the last arrival the others' completions are drawn to
        self._seen_s = 0.0  # the time the completions above are counted to
        self._tie = 0.0  # the error-diffusion counter of tied arrivals
        self._rng = rng
        self._gaps: list[float] = []  # unit exponential gaps between the others' completions
        self._g = 0  # the next one
        self._hazard = 0.0  # the others' completions' integrated intensity, and the next one's
        self._due = float(rng.exponential())

    def next_taken(self, k: int, limit_s: float, outstanding: Sequence[int]) -> tuple[int, int]:
        """From arrival `k` on, those at or before `limit_s` (the simulated instances' next
        event) go to the others until one goes to a simulated instance: that arrival's
        number and instance, or the first arrival past `limit_s` (or all of them) and
        `ELSEWHERE`. `outstanding`: the simulated instances' requests in flight, unchanged
        until `limit_s` but for what this routes to them."""
        arrival, n, others = self._arrival, len(self._arrival), self._others
        if k >= n or arrival[k] > limit_s:
            return k, ELSEWHERE
        held = sum(outstanding)
        now = arrival[k]
        dt = now - self._seen_s
        self._seen_s = now
        decay = math.exp(-dt / SMOOTHING_S)
        # The simulated instances' completions since the last call, and their requests in
        # flight x seconds (those held after the last call, a bound: some finished since).
        self._done = self._done * decay + (self._held - held)
        self._exposure = self._exposure * decay + self._held * dt
        rate = self._done / self._exposure if self._exposure > 0.0 else 0.0
        i = least_loaded(outstanding)
        mine = outstanding[i]
        tied_mine = sum(1 for o in outstanding if o == mine)
        # The others' least-loaded hold the floor of their mean load: `mine` is below it
        # from `above` requests in all on, tied with it from `tied`.
        tied, above = mine * others, (mine + 1) * others
        load, last, tie = self._load, self._last_s, self._tie
        hazard, due, gaps, g = self._hazard, self._due, self._gaps, self._g
        taken = ELSEWHERE
        while k < n:
            now = arrival[k]
            if now > limit_s:
                break
            # The others' completions: a Poisson process at `rate` per request in flight
            # (its integrated intensity `hazard` against unit exponential gaps).
            hazard += rate * load * (now - last)
            last = now
            while hazard >= due and load >= 1.0:
                load -= 1.0
                if g == len(gaps):
                    gaps, g = self._rng.exponential(size=GAPS).tolist(), 0
                due += gaps[g]
                g += 1
            if load < 1.0:
                hazard = min(hazard, due)  # no completions owed by an idle rest
            if load >= above:
                taken = i
                break
            if load >= tied:
                # Of the tied instances, this one's share: the others at the floor of their
                # mean are `above - load` of them.
                tie += tied_mine / (tied_mine + above - load)
                if tie >= 1.0:
                    tie -= 1.0
                    taken = i
                    break
            load += 1.0
            k += 1
        self._load, self._last_s, self._tie = load, last, tie
        self._hazard, self._due, self._gaps, self._g = hazard, due, gaps, g
        self._held = held + (taken != ELSEWHERE)
        return k, taken
