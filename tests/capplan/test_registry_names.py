"""The names of routers and autoscaling policies: the registries (planner.fleet.routing,
planner.autoscale.policies) hold them; contracts hold their form (contracts.names), so a
router or a policy is added in its registry's module alone. A registration of another form is
refused, a file with a name of another form is refused, the planner refuses a well-formed name
it has no entry for, and the help texts read the registries."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import TypeAdapter, ValidationError

from capplan.commands.autoscale_opts import AutoscalePolicy
from capplan.commands.shared import RoutingOption
from contracts.autoscale import PolicyKind, PolicySpec, ReactiveMetric
from contracts.errors import ConfigError
from contracts.plan import FleetPoint, RoutingName
from planner.autoscale.policies import POLICIES, parse_policy, policy_kind, register_policy
from planner.fleet import routing as routing_module
from planner.fleet.routing import (
    ALL_ROUTINGS,
    RoundRobin,
    RoutingSettings,
    known_routings,
    load_only_routings,
    make_router,
    parse_routings,
    register_router,
)
from planner.verify.options import VerifyOptions


def _help(option: object) -> str:
    return " ".join(str(getattr(m, "help", "")) for m in option.__metadata__)  # type: ignore[attr-defined]


def test_every_router_and_policy_registered_has_the_form_contracts_hold() -> None:
    assert known_routings() == ALL_ROUTINGS
    for name in known_routings():
        assert TypeAdapter(RoutingName).validate_python(name) == name
    for kind in POLICIES:
        assert TypeAdapter(PolicyKind).validate_python(kind) == kind


@pytest.mark.parametrize("name", ["Round_Robin", "toy-router", "toy router", "_toy", "toy_", ""])
def test_a_name_of_another_form_is_refused_by_the_registries_and_the_files(name: str) -> None:
    before, policies = known_routings(), dict(POLICIES)
    with pytest.raises(ValueError, match="plan.json cannot hold the name"):
        register_router(name)(RoundRobin)
    with pytest.raises(ConfigError, match="plan.json cannot hold the name"):
        register_policy(name, POLICIES["rate"])
    assert known_routings() == before and policies == POLICIES
    with pytest.raises(ValidationError):
        TypeAdapter(RoutingName).validate_python(name)
    with pytest.raises(ValidationError):
        PolicySpec(kind=name)


def test_a_router_is_added_by_registering_it_alone() -> None:
    """A new name in the registry alone: plan.json holds it, --routing and make_router take it."""
    register_router("toy_router")(RoundRobin)
    try:
        assert "toy_router" in known_routings() and "toy_router" in load_only_routings()
        assert parse_routings("round_robin,toy_router") == ("round_robin", "toy_router")
        assert make_router("toy_router", 3, RoutingSettings()).route(None, [0, 0, 0]) == 0  # type: ignore[arg-type]
        point = FleetPoint(
            instances=3, routing="toy_router", attainment=1.0, meets_slo=True, requests=10
        )
        assert FleetPoint.model_validate_json(point.model_dump_json()).routing == "toy_router"
    finally:
        routing_module._ROUTERS.pop("toy_router")
    assert known_routings() == ALL_ROUTINGS


def test_a_policy_is_added_by_registering_it_alone() -> None:
    register_policy("toy_policy", POLICIES["rate"])
    try:
        spec = parse_policy("toy_policy:min=2")
        assert spec.kind == "toy_policy" and policy_kind(spec) is POLICIES["rate"]
    finally:
        POLICIES.pop("toy_policy")


def test_a_well_formed_name_with_no_entry_is_refused_where_the_planner_uses_it() -> None:
    """The files take any name of the form; the planner's options, --routing, make_router and
    the policies refuse one their registry lacks, listing the known ones."""
    point = FleetPoint(instances=1, routing="no_such", attainment=1.0, meets_slo=True, requests=1)
    assert point.routing == "no_such"
    with pytest.raises(ValidationError, match="unknown routing 'no_such'; known: round_robin"):
        VerifyOptions(plan_path="p", profile_path="q", out_dir="o", routing="no_such")
    for refuse in (lambda: parse_routings("no_such"), lambda: make_router("no_such", 2)):
        with pytest.raises(ConfigError, match="unknown routing 'no_such'; known: round_robin"):
            refuse()
    with pytest.raises(ConfigError, match="unknown kind 'no_such'; known: reactive"):
        parse_policy("no_such")
    with pytest.raises(ConfigError, match="unknown policy 'no_such'; known: reactive"):
        policy_kind(PolicySpec(kind="no_such"))


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
