"""What a Kubernetes API server would say of a Job, Deployment, Service or PersistentVolumeClaim.

`workload_problems` checks the object against the Kubernetes OpenAPI definitions (vendored,
release-1.36: `io.k8s.api.batch.v1.Job`, `io.k8s.api.apps.v1.Deployment`,
`io.k8s.api.core.v1.Service`, `io.k8s.api.core.v1.PersistentVolumeClaim` and every definition
they reach), strict about unknown fields as
`kubectl apply` is, and against the API server's validation that needs no cluster state
(kubernetes/kubernetes release-1.36): pkg/apis/apps/validation ValidateDeploymentSpec (the
selector must match the template's labels, restartPolicy Always), pkg/apis/batch/validation
validateJobSpec (restartPolicy Never or OnFailure), pkg/apis/core/validation validatePodSpec
and validateContainers (DNS-1123 label names, unique; an image; ports in 1..65535) and
ValidateService (a DNS-1035 label name, named ports when there are several, ports in range),
ValidatePersistentVolumeClaim (a DNS subdomain name, access modes, a storage request). No
cluster is needed: nothing that reads other objects is checked. Returns a list of problems,
empty when the object would be accepted.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from contracts.k8s import DNS_LABEL, DNS_SUBDOMAIN
from tests.helpers.k8s_schema import (
    QUANTITY,
    SCHEMAS,
    _schema_problems,
    _strict,
)

WORKLOADS_SWAGGER = SCHEMAS / "k8s-1.36-workloads.swagger.json"
ROOTS = {
    ("batch/v1", "Job"): "io.k8s.api.batch.v1.Job",
    ("apps/v1", "Deployment"): "io.k8s.api.apps.v1.Deployment",
    ("v1", "Service"): "io.k8s.api.core.v1.Service",
    ("v1", "PersistentVolumeClaim"): "io.k8s.api.core.v1.PersistentVolumeClaim",
}
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")  # RFC 1035 label, at most 63
RESTART = {"Job": {"Never", "OnFailure"}, "Deployment": {"Always"}}


INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"


@cache
def _definitions() -> dict[str, Any]:
    """The vendored definitions, strict, with the two formats OpenAPI v2 cannot say in types:
    an IntOrString decodes from a JSON integer or string (apimachinery intstr.UnmarshalJSON), a
    Quantity from a string in its grammar or a number (resource.Quantity.UnmarshalJSON)."""
    spec = json.loads(WORKLOADS_SWAGGER.read_text(encoding="utf-8"))
    definitions: dict[str, Any] = _strict(spec["definitions"])
    definitions[INT_OR_STRING] = {"type": ["integer", "string"]}
    definitions[QUANTITY_DEF] = {
        "anyOf": [{"type": "string", "pattern": QUANTITY.pattern}, {"type": "number"}]
    }
    return definitions


def _label_problems(value: str, where: str, pattern: re.Pattern[str]) -> list[str]:
    if len(value) > 63 or not pattern.match(value):
        return [f"{where}: {value!r} is no DNS label"]
    return []


def _port_problems(port: Any, where: str) -> list[str]:
    ok = isinstance(port, int) and 1 <= port <= 65535
    return [] if ok else [f"{where}: {port!r} must be between 1 and 65535"]


def _container_problems(containers: list[dict[str, Any]], where: str) -> list[str]:
    found, names = [], [c.get("name", "") for c in containers]
    if len(set(names)) != len(names):
        found.append(f"{where}: duplicate container names {names}")
    for i, c in enumerate(containers):
        found += _label_problems(c.get("name", ""), f"{where}[{i}].name", DNS_LABEL)
        if not c.get("image"):
            found.append(f"{where}[{i}].image: Required value")
        for j, p in enumerate(c.get("ports", [])):
            found += _port_problems(p.get("containerPort"), f"{where}[{i}].ports[{j}]")
    return found


def _pod_template_problems(kind: str, spec: dict[str, Any]) -> list[str]:
    template = spec.get("template", {})
    pod = template.get("spec", {})
    found = _container_problems(pod.get("containers", []), "spec.template.spec.containers")
    restart = pod.get("restartPolicy", "Always")
    if restart not in RESTART[kind]:
        found.append(f"spec.template.spec.restartPolicy: {restart!r} not in {RESTART[kind]}")
    if kind == "Deployment":
        labels = template.get("metadata", {}).get("labels", {})
        wanted = spec.get("selector", {}).get("matchLabels", {})
        if not wanted or any(labels.get(k) != v for k, v in wanted.items()):
            found.append("spec.template.metadata.labels: `selector` does not match template")
    return found


def _service_problems(spec: dict[str, Any]) -> list[str]:
    ports, found = spec.get("ports", []), []
    for i, p in enumerate(ports):
        found += _port_problems(p.get("port"), f"spec.ports[{i}].port")
        if len(ports) > 1 and not p.get("name"):
            found.append(f"spec.ports[{i}].name: Required value (several ports)")
        target = p.get("targetPort", p.get("port"))
        if isinstance(target, int):
            found += _port_problems(target, f"spec.ports[{i}].targetPort")
    return found


def _claim_problems(spec: dict[str, Any]) -> list[str]:
    found = [] if spec.get("accessModes") else ["spec.accessModes: Required value"]
    modes = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}
    found += [f"spec.accessModes: {m!r} not supported" for m in spec.get("accessModes", [])
              if m not in modes]  # fmt: skip
    if "storage" not in spec.get("resources", {}).get("requests", {}):
        found.append("spec.resources.requests.storage: Required value")
    return found


def workload_problems(obj: dict[str, Any]) -> list[str]:
    """Why the Kubernetes API server would refuse `obj` (a Job, Deployment or Service)."""
    root = ROOTS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if root is None:
        return [f"apiVersion/kind: expected one of {sorted(ROOTS)}"]
    found = _schema_problems(obj, {"definitions": _definitions(), "$ref": f"#/definitions/{root}"})
    if found:  # an object that does not decode never reaches validation.go
        return found
    name, kind, spec = obj["metadata"].get("name", ""), obj["kind"], obj.get("spec", {})
    if kind == "Service":
        return _label_problems(name, "metadata.name", DNS_1035) + _service_problems(spec)
    names = [] if DNS_SUBDOMAIN.match(name) else [f"metadata.name: {name!r} is no DNS subdomain"]
    if kind == "PersistentVolumeClaim":
        return names + _claim_problems(spec)
    return names + _pod_template_problems(kind, spec)
