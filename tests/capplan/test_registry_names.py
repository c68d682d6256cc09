"""The names of routers and autoscaling policies: the registries (planner.fleet.routing,
planner.autoscale.policies) and the words plan.json can hold (contracts) are the same set,
a registration contracts cannot hold is refused, and the help texts read the registries."""

from __future__ import annotations

from typing import get_args

import pytest

from capplan.commands.autoscale_opts import AutoscalePolicy
from capplan.commands.shared import RoutingOption
from contracts.autoscale import PolicyKind, ReactiveMetric
from contracts.errors import ConfigError
from contracts.plan import RoutingName
from planner.autoscale.policies import POLICIES, register_policy
from planner.fleet.routing import (
    ALL_ROUTINGS,
    RoundRobin,
    known_routings,
    load_only_routings,
    register_router,
)


def _help(option: object) -> str:
    return " ".join(str(getattr(m, "help", "")) for m in option.__metadata__)  # type: ignore[attr-defined]


def test_every_router_registered_is_a_name_contracts_hold_and_back() -> None:
    assert sorted(known_routings()) == sorted(get_args(RoutingName))
    assert known_routings() == ALL_ROUTINGS


def test_every_policy_registered_is_a_kind_contracts_hold_and_back() -> None:
    assert sorted(POLICIES) == sorted(get_args(PolicyKind))


def test_a_router_contracts_cannot_hold_is_refused() -> None:
    before = known_routings()
    with pytest.raises(ValueError, match="contracts.plan.RoutingName"):
        register_router("toy_router")(RoundRobin)  # type: ignore[arg-type]
    assert known_routings() == before


def test_a_policy_contracts_cannot_hold_is_refused() -> None:
    before = dict(POLICIES)
    with pytest.raises(ConfigError, match="contracts.autoscale.PolicyKind"):
        register_policy("toy_policy", POLICIES["rate"])
    assert before == POLICIES


def test_the_help_texts_list_the_registered_names() -> None:
    routing_help = _help(RoutingOption)
    assert all(name in routing_help for name in known_routings())
    policy_help = _help(AutoscalePolicy)
    assert all(kind in policy_help for kind in POLICIES)
    assert f"metric={'|'.join(get_args(ReactiveMetric))}" in policy_help


def test_verify_help_lists_the_routers_it_can_run() -> None:
    from typer.main import get_command

    from capplan.cli import app

    verify = get_command(app).commands["verify"]  # type: ignore[attr-defined]
    routing = next(p for p in verify.params if p.name == "routing")
    assert f"({', '.join(load_only_routings())})" in str(routing.help)
