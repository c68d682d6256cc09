"""The form of a registry's name: a router (planner.fleet.routing) or an autoscale policy kind
(planner.autoscale.policies), as plan.json holds it.

Which names exist is the registry's, not the contract's: adding a router or a policy touches
its registry's module alone. A file is validated here for the form (lowercase words joined by
underscores, e.g. `round_robin`), each registry refuses to register a name of another form,
and the planner refuses a well-formed name it has no entry for where it uses one.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, StringConstraints

NAME_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"
NAME_FORM = "lowercase words joined by underscores, e.g. round_robin"

RegistryName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
# which registry holds the names, in the JSON schema (scripts/gen_schema_docs.py lists them)
REGISTRY_KEY = "x-registry"
ROUTERS = "planner.fleet.routing"
POLICIES = "planner.autoscale.policies"
RoutingName = Annotated[RegistryName, Field(json_schema_extra={REGISTRY_KEY: ROUTERS})]
PolicyName = Annotated[RegistryName, Field(json_schema_extra={REGISTRY_KEY: POLICIES})]


def is_registry_name(name: str) -> bool:
    """Whether `name` has a registry name's form (NAME_PATTERN), so a file can hold it."""
    return re.fullmatch(NAME_PATTERN, name) is not None
