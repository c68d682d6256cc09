"""The fleet's routers: which instance each request goes to, chosen by name from one registry.

A router sees the request (its prompt's chained block hashes, its session) and how many
requests each instance holds (routed and not yet finished), and answers an instance index.
It never looks into the engines' caches: what it knows of them it learnt from its own
decisions, as a real router does.

- `round_robin`: instance k mod n for the k-th request.
- `least_outstanding`: fewest outstanding requests, lowest index on a tie.
- `power_of_two`: two distinct instances drawn at random (seeded), the one with fewer
  outstanding requests (the first drawn on a tie): Mitzenmacher's power of two choices.
- `session_affinity`: every request of a session goes where the session's first request
  went (the least-loaded instance then); a request without a session to the least-loaded.
- `prefix_aware`: an approximate index of block hashes per instance, fed by the router's
  own decisions (every routed request's blocks go into its instance's index, an LRU bounded
  by the instance's KV blocks), as llm-d's approximate prefix scorer, the vLLM and SGLang
  `cache_aware` routers and AIBrix `prefix-cache` keep. The instance with the longest
  matched prefix gets the request when the match covers at least `prefix_threshold` of its
  blocks, else the least-loaded instance; when the load is skewed (the busiest instance
  holds more than `balance_abs` requests over the idlest and more than `balance_rel` times
  it), the least-loaded, whatever the match.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Protocol

import numpy as np
from pydantic import AfterValidator, Field

from contracts.errors import ConfigError
from contracts.names import NAME_FORM, is_registry_name
from contracts.plan import RoutingName
from planner.engine import EngineRequest


def _registered(name: str) -> str:
    """`name` when a router is registered under it (for options models: pydantic's refusal)."""
    if name not in _ROUTERS:
        raise ValueError(f"unknown routing {name!r}; known: {', '.join(_ROUTERS)}")
    return name


# A router's name as plan.json holds it (contracts.plan.RoutingName, the form), and in an options
# model one the registry below holds.
Routing = Annotated[RoutingName, AfterValidator(_registered)]


@dataclass(frozen=True, kw_only=True)
class RoutingSettings:
    """The routers' knobs (only `prefix_aware` and `power_of_two` read any).

    `index_blocks` bounds each instance's prefix index (None: unbounded); the fleet
    simulator sets it to the engine's KV blocks. Raises ConfigError for a threshold outside
    (0, 1], a negative balance_abs or a balance_rel below 1.
    """

    # the bound read where options are validated (PlanOptions; --prefix-threshold)
    prefix_threshold: Annotated[float, Field(gt=0, le=1)] = 0.3
    balance_abs: int = 8
    balance_rel: float = 1.5
    index_blocks: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.prefix_threshold <= 1.0:
            raise ConfigError(
                "the prefix router's threshold is the share of a request's blocks its best "
                f"match must cover: expected a number in (0, 1], got {self.prefix_threshold}"
            )
        if self.balance_abs < 0 or self.balance_rel < 1.0:
            raise ConfigError(
                "the load-skew fallback needs balance_abs >= 0 and balance_rel >= 1 "
                f"(got {self.balance_abs}, {self.balance_rel})"
            )
        if self.index_blocks is not None and self.index_blocks < 1:
            raise ConfigError(f"index_blocks must be >= 1, got {self.index_blocks}")


class Router(Protocol):
    """Picks an instance for each request, in arrival order."""

    def route(self, request: EngineRequest, outstanding: Sequence[int]) -> int: ...


RouterFactory = Callable[[int, RoutingSettings], Router]
_ROUTERS: dict[str, RouterFactory] = {}
_READS_REQUEST: set[str] = set()


def register_router(
    name: Routing, *, reads_request: bool = False
) -> Callable[[RouterFactory], RouterFactory]:
    """Register a router factory under `name`; a second one under the same name is an error,
    and so is a name plan.json cannot hold (not of contracts.names' form: lowercase words
    joined by underscores). `reads_request`: the router reads the request's prefix blocks or
    session (not its load alone), so a proxy that sees no token ids (verify's) cannot run it."""

    def add(factory: RouterFactory) -> RouterFactory:
        if name in _ROUTERS:
            raise ValueError(f"router {name!r} registered twice")
        if not is_registry_name(name):
            raise ValueError(f"router {name!r}: plan.json cannot hold the name; use {NAME_FORM}")
        _ROUTERS[name] = factory
        if reads_request:
            _READS_REQUEST.add(name)
        return factory

    return add


def known_routings() -> tuple[Routing, ...]:
    """Every registered router's name, in registration order (for help texts)."""
    return tuple(_ROUTERS)


def load_only_routings() -> tuple[Routing, ...]:
    """The routers that choose by the instances' load alone, never reading the request."""
    return tuple(n for n in known_routings() if n not in _READS_REQUEST)


def check_routing(name: str) -> Routing:
    """`name` as a Routing; ConfigError listing the known routers for any other."""
    if name not in _ROUTERS:
        raise ConfigError(f"unknown routing {name!r}; known: {', '.join(_ROUTERS)}")
    return name


def make_router(name: str, instances: int, settings: RoutingSettings | None = None) -> Router:
    """A fresh router `name` over `instances` instances. Raises ConfigError for an unknown
    name (listing the known ones)."""
    return _ROUTERS[check_routing(name)](instances, settings or RoutingSettings())


def parse_routings(text: str) -> tuple[Routing, ...]:
    """A comma-separated list of router names (`all`: every router), in the order given.

    Raises ConfigError for an empty list or an unknown name, listing the known ones.
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    if names == ["all"]:
        return known_routings()
    if not names:
        raise ConfigError(f"--routing needs router names; known: all, {', '.join(_ROUTERS)}")
    return tuple(dict.fromkeys(check_routing(n) for n in names))


def least_loaded(outstanding: Sequence[int]) -> int:
    """The instance with the fewest outstanding requests, lowest index on a tie."""
    return min(range(len(outstanding)), key=outstanding.__getitem__)


@register_router("round_robin")
class RoundRobin:
    def __init__(self, instances: int, settings: RoutingSettings) -> None:
        self._n = instances
        self._next = 0

    def route(self, request: EngineRequest, outstanding: Sequence[int]) -> int:
        i = self._next
        self._next = (i + 1) % self._n
        return i


@register_router("least_outstanding")
class LeastOutstanding:
    def __init__(self, instances: int, settings: RoutingSettings) -> None:
        pass

    def route(self, request: EngineRequest, outstanding: Sequence[int]) -> int:
        return least_loaded(outstanding)


@register_router("power_of_two")
class PowerOfTwo:
    def __init__(self, instances: int, settings: RoutingSettings) -> None:
        self._n = instances
        self._rng = np.random.default_rng([settings.seed, 0x2C])

    def route(self, request: EngineRequest, outstanding: Sequence[int]) -> int:
        if self._n == 1:
            return 0
        a, b = self._rng.choice(self._n, size=2, replace=False).tolist()
        return b if outstanding[b] < outstanding[a] else a


@register_router("session_affinity", reads_request=True)
class SessionAffinity:
    def __init__(self, instances: int, settings: RoutingSettings) -> None:
        self._home: dict[str, int] = {}

    def route(self, request: EngineRequest, outstanding: Sequence[int]) -> int:
        session = request.session_id
        if session is None:
            return least_loaded(outstanding)
        home = self._home.get(session)
        if home is None:
            home = self._home[session] = least_loaded(outstanding)
        return home


class PrefixIndex:
    """Which instances the router believes hold each block hash: one LRU per instance,
    bounded by `capacity_blocks`, and one map from hash to a bit mask of instances."""

    def __init__(self, instances: int, capacity_blocks: int | None) -> None:
        self._lru: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(instances)]
        self._holders: dict[int, int] = {}
        self._cap = capacity_blocks

    def match(self, hashes: Sequence[int]) -> list[int]:
        """Each instance's matched leading blocks of `hashes` (chained: a match stops at the
        first block the instance lacks)."""
        depth = [0] * len(self._lru)
        holders = self._holders
        alive = (1 << len(self._lru)) - 1
        for k, h in enumerate(hashes):
            still = alive & holders.get(h, 0)
            gone = alive & ~still
            while gone:
                low = gone & -gone
                depth[low.bit_length() - 1] = k
                gone ^= low
            alive = still
            if not alive:
                return depth
        while alive:
            low = alive & -alive
            depth[low.bit_length() - 1] = len(hashes)
            alive ^= low
        return depth

    def add(self, instance: int, hashes: Sequence[int]) -> None:
        """Record that `instance` now holds `hashes`; touched last block first, so a prompt's
        head is the most recent and the tail goes first, as in the engine's cache."""
        lru = self._lru[instance]
        holders = self._holders
        bit = 1 << instance
        for h in reversed(hashes):
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
                holders[h] = holders.get(h, 0) | bit
        cap = self._cap
        while cap is not None and len(lru) > cap:
            old, _ = lru.popitem(last=False)
            rest = holders[old] & ~bit
            if rest:
                holders[old] = rest
            else:
                del holders[old]


@register_router("prefix_aware", reads_request=True)
class PrefixAware:
    def __init__(self, instances: int, settings: RoutingSettings) -> None:
        self._settings = settings
        self._index = PrefixIndex(instances, settings.index_blocks)

    def skewed(self, outstanding: Sequence[int]) -> bool:
        """The busiest instance holds more than balance_abs requests over the idlest and
        more than balance_rel times as many."""
        s = self._settings
        hi, lo = max(outstanding), min(outstanding)
        return hi - lo > s.balance_abs and hi > s.balance_rel * lo

    def route(self, request: EngineRequest, outstanding: Sequence[int]) -> int:
        hashes = request.block_hashes
        i = least_loaded(outstanding)
        if hashes and not self.skewed(outstanding):
            depth = self._index.match(hashes)
            best = max(range(len(depth)), key=lambda j: (depth[j], -outstanding[j], -j))
            if depth[best] >= self._settings.prefix_threshold * len(hashes):
                i = best
        if hashes:
            self._index.add(i, hashes)
        return i


ALL_ROUTINGS: tuple[Routing, ...] = known_routings()  # every router above, in that order
