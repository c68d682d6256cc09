"""examples/kubernetes/capplan-limit.yaml: every object passes the Kubernetes OpenAPI schema
and the API server's validation (tests.helpers.k8s_workloads), and the objects fit together:
the workers reach the master's Service, as many join as the master expects, and each
container's arguments are options its `capplan` command accepts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from capplan.cli import app
from planner.loadtest.remote import parse_address
from tests.helpers.k8s_workloads import workload_problems

MANIFEST = Path(__file__).resolve().parents[2] / "examples" / "kubernetes" / "capplan-limit.yaml"


def _objects() -> dict[str, dict[str, Any]]:
    docs = list(yaml.safe_load_all(MANIFEST.read_text(encoding="utf-8")))
    return {d["kind"]: d for d in docs}


def _options(obj: dict[str, Any]) -> dict[str, Any]:
    """The container's args parsed by the real CLI (click raises on an unknown option)."""
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    command, *args = container["args"]
    group: Any = typer.main.get_command(app)
    cmd = group.get_command(group.context_class(group, info_name="capplan"), command)
    with cmd.make_context(command, list(args)) as ctx:  # typer's click raises on a bad option
        return dict(ctx.params)


def _fit_problems(objs: dict[str, dict[str, Any]]) -> list[str]:
    """Why the objects, each valid, would not work together."""
    job, workers, service, claim = (
        objs[k] for k in ("Job", "Deployment", "Service", "PersistentVolumeClaim")
    )
    found = []
    master, worker = _options(job), _options(workers)
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    selector = service["spec"]["selector"]
    if any(pod_labels.get(k) != v for k, v in selector.items()):
        found.append("the Service does not select the master's pod")
    worker_labels = workers["spec"]["template"]["metadata"]["labels"]
    if all(worker_labels.get(k) == v for k, v in selector.items()):
        found.append("the Service also selects the workers")
    host, port = parse_address(worker["master"], "--master")
    _, bind_port = parse_address(master["master_bind"], "--master-bind")
    targets = {p["port"]: p.get("targetPort", p["port"]) for p in service["spec"]["ports"]}
    if host != service["metadata"]["name"] or targets.get(port) != bind_port:
        found.append(f"workers join {host}:{port}, the master listens behind another address")
    if master["expect_workers"] != workers["spec"]["replicas"]:
        found.append("--expect-workers differs from the worker replicas")
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in job["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    if claims != [claim["metadata"]["name"]]:
        found.append("the master's run directory is not on the claim")
    return found


def test_every_object_passes_the_schema_and_the_api_servers_validation() -> None:
    objs = _objects()
    assert sorted(objs) == ["Deployment", "Job", "PersistentVolumeClaim", "Service"]
    for kind, obj in objs.items():
        assert workload_problems(obj) == [], kind


def test_the_objects_fit_together() -> None:
    assert _fit_problems(_objects()) == []


def _set(path: str, value: Any) -> Any:
    def change(objs: dict[str, dict[str, Any]]) -> None:
        kind, *keys = path.split(".")
        node: Any = objs[kind]
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


BROKEN = {
    "unknown field": _set("Job.spec.template.spec.containers.0.cpu", "1"),
    "Job restarts Always": _set("Job.spec.template.spec.restartPolicy", "Always"),
    "selector off template": _set("Deployment.spec.selector.matchLabels.component", "master"),
    "port out of range": _set("Service.spec.ports.0.port", 70000),
    "no image": _set("Deployment.spec.template.spec.containers.0.image", ""),
    "bad name": _set("Service.metadata.name", "1-capplan"),
    "claim without storage": _set("PersistentVolumeClaim.spec.resources.requests", {}),
}
MISFIT = {
    "3 replicas for 4 expected": _set("Deployment.spec.replicas", 3),
    "workers join another Service": _set(
        "Deployment.spec.template.spec.containers.0.args.1", "--master=capplan:5557"
    ),
    "workers join another port": _set(
        "Deployment.spec.template.spec.containers.0.args.1", "--master=capplan-limit:5558"
    ),
    "Service selects another pod": _set("Service.spec.selector.component", "worker"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_validation_refuses_a_broken_object(name: str) -> None:
    objs = copy.deepcopy(_objects())
    assert not any(workload_problems(obj) for obj in objs.values())  # each change alone
    BROKEN[name](objs)
    assert any(workload_problems(obj) for obj in objs.values()), name


@pytest.mark.parametrize("name", sorted(MISFIT))
def test_objects_that_do_not_fit_are_found(name: str) -> None:
    objs = copy.deepcopy(_objects())
    assert not _fit_problems(objs)  # each change alone
    MISFIT[name](objs)
    assert _fit_problems(objs), name


def test_an_unknown_capplan_option_in_the_args_is_refused() -> None:
    objs = copy.deepcopy(_objects())
    objs["Job"]["spec"]["template"]["spec"]["containers"][0]["args"].append("--workerz=2")
    with pytest.raises(Exception, match="No such option: --workerz"):
        _options(objs["Job"])
