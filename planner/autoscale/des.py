"""Request-level discrete-event simulation of a fleet whose replica count an autoscaler changes.

Each replica is `slots` servers (the limit's concurrency); requests wait in one fleet-wide
FCFS queue (a router that sends each request to a free slot) and hold a slot for their drawn
service time. Every `poll_s` the controller reads the metrics and sets the replica count: a
new replica serves `cold_start_s` after the poll that asked for it; a removed loading replica
is cancelled, a removed ready one drains (takes no new request, leaves when idle). This is
the truth the per-step model (`fluid.py`) is measured against, and what the step test checks
against Erlang C: it never computes a queueing formula itself.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from planner.autoscale.policies import Controller, Metrics

_ARRIVAL, _DONE, _READY, _POLL = 0, 1, 2, 3


@dataclass
class _Replica:
    created_s: float
    ready_s: float
    ready: bool = False
    busy: int = 0
    draining: bool = False
    removed_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class DesRun:
    """One simulation: per request its start and replica (-1: never started), and the log."""

    arrival_s: np.ndarray
    start_s: np.ndarray  # nan: still waiting at the horizon
    replica: np.ndarray
    events: list[tuple[float, str, int]]  # (time, "scale"|"ready"|"drain", replica or target)
    replica_s: float  # replica-seconds held (loading and draining included)
    horizon_s: float

    def wait_s(self) -> np.ndarray:
        """Each request's wait; one never started waits until the horizon (censored)."""
        return np.where(np.isnan(self.start_s), self.horizon_s, self.start_s) - self.arrival_s


@dataclass
class _Fleet:
    slots: int
    cold_start_s: float
    replicas: list[_Replica] = field(default_factory=list)
    events: list[tuple[float, str, int]] = field(default_factory=list)

    def live(self) -> list[int]:
        return [i for i, r in enumerate(self.replicas) if r.removed_s is None and not r.draining]

    def free(self) -> int | None:
        best, best_busy = None, self.slots
        for i in self.live():
            r = self.replicas[i]
            if r.ready and r.busy < best_busy:
                best, best_busy = i, r.busy
        return best

    def scale_to(self, now_s: float, target: int, heap: list[tuple[float, int, int, int]]) -> None:
        live = self.live()
        for _ in range(target - len(live)):
            self.replicas.append(_Replica(now_s, now_s + self.cold_start_s))
            i = len(self.replicas) - 1
            heapq.heappush(heap, (now_s + self.cold_start_s, _READY, i, 0))
        if target < len(live):
            self.events.append((now_s, "scale", target))
            # Cancel loading replicas first (newest first), then drain the least busy.
            order = sorted(live, key=lambda i: (self.replicas[i].ready, self.replicas[i].busy, -i))
            for i in order[: len(live) - target]:
                self._retire(i, now_s)
        elif target > len(live):
            self.events.append((now_s, "scale", target))

    def _retire(self, i: int, now_s: float) -> None:
        r = self.replicas[i]
        r.draining = True
        if not r.ready or r.busy == 0:
            r.removed_s = now_s
        self.events.append((now_s, "drain", i))


def simulate(
    arrival_s: np.ndarray,
    service_s: np.ndarray,
    *,
    slots: int,
    initial: int,
    controller: Controller | None,
    cold_start_s: float,
    horizon_s: float,
    kv_per_slot: float = 1.0,
) -> DesRun:
    """Serve `arrival_s` (sorted) with service times `service_s` on `initial` ready replicas.

    `controller` None holds the count fixed (the static plan). `kv_per_slot` is the KV-cache
    usage one busy slot adds to its replica's usage fraction (the kv metric).
    """
    n = len(arrival_s)
    start = np.full(n, np.nan)
    where = np.full(n, -1, dtype=np.int64)
    fleet = _Fleet(slots, cold_start_s)
    for _ in range(initial):
        fleet.replicas.append(_Replica(0.0, 0.0, ready=True))
    heap: list[tuple[float, int, int, int]] = []
    poll_s = controller.spec.poll_s if controller is not None else math.inf
    if controller is not None:
        heapq.heappush(heap, (poll_s, _POLL, 0, 0))
    queue: deque[int] = deque()
    recent: deque[float] = deque()
    nxt = 0

    def begin(req: int, i: int, now_s: float) -> None:
        r = fleet.replicas[i]
        r.busy += 1
        start[req], where[req] = now_s, i
        heapq.heappush(heap, (now_s + float(service_s[req]), _DONE, i, req))

    while True:
        t_arr = float(arrival_s[nxt]) if nxt < n else math.inf
        if heap and heap[0][0] <= t_arr:
            now, kind, i, _ = heapq.heappop(heap)
        elif nxt < n:
            now, kind, i = t_arr, _ARRIVAL, -1
        else:
            break
        if now > horizon_s:
            break
        if kind == _ARRIVAL:
            recent.append(now)
            j = fleet.free()
            if j is None:
                queue.append(nxt)
            else:
                begin(nxt, j, now)
            nxt += 1
        elif kind == _DONE:
            r = fleet.replicas[i]
            r.busy -= 1
            if r.draining:
                if r.busy == 0 and r.removed_s is None:
                    r.removed_s = now
            elif queue:
                begin(queue.popleft(), i, now)
        elif kind == _READY:
            r = fleet.replicas[i]
            if r.removed_s is not None:
                continue  # cancelled while loading
            r.ready = True
            fleet.events.append((now, "ready", i))
            while queue and r.busy < slots:
                begin(queue.popleft(), i, now)
        else:
            assert controller is not None
            while recent and recent[0] <= now - 60.0:
                recent.popleft()
            live = fleet.live()
            ready = [fleet.replicas[k] for k in live if fleet.replicas[k].ready]
            m = Metrics(
                now_s=now,
                replicas=len(live),
                ready=len(ready),
                waiting=float(len(queue)),
                kv_usage=sum(r.busy for r in ready) * kv_per_slot,
                rate_rps=len(recent) / min(60.0, now),
            )
            fleet.scale_to(now, controller.decide(m), heap)
            heapq.heappush(heap, (now + poll_s, _POLL, 0, 0))
    held = sum(
        max(
            0.0, min(r.removed_s if r.removed_s is not None else horizon_s, horizon_s) - r.created_s
        )
        for r in fleet.replicas
    )
    return DesRun(
        arrival_s=arrival_s,
        start_s=start,
        replica=where,
        events=fleet.events,
        replica_s=held,
        horizon_s=horizon_s,
    )
