"""The Kubernetes API server's rules for object names, and KEDA's, for the objects capplan writes.

kubernetes/kubernetes apimachinery pkg/util/validation: a namespace is a DNS-1123 label
(IsDNS1123Label: lowercase letters, digits and '-', starting and ending with a letter or
digit, at most 63 characters); most objects' metadata.name (a Deployment, an HPA, a
ScaledObject, a PrometheusRule) is a DNS-1123 subdomain (IsDNS1123Subdomain: such labels
joined by '.', at most 253). KEDA v2.20.2 (apis/keda/v1alpha1/scaledobject_webhook.go,
verifyName; controllers/keda/hpa.go getHPAName) names the HPA it makes `keda-hpa-<scaled object
name>` and refuses a ScaledObject whose name or that HPA's name is longer than a label value
(63 characters), since it labels objects with them. The manifests capplan writes check their
names here; the tests' validators (tests/helpers/k8s_schema.py) read the same rules.
"""

from __future__ import annotations

import re

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_LABEL = 63
MAX_SUBDOMAIN = 253
# KEDA's limit on a ScaledObject's name and its HPA's (validation.LabelValueMaxLength).
KEDA_MAX_NAME = 63
LABEL_RULE = (
    f"a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter "
    f"or digit, at most {MAX_LABEL} characters"
)
SUBDOMAIN_RULE = (
    f"a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a "
    f"letter or digit, at most {MAX_SUBDOMAIN} characters"
)


def is_dns_label(text: str) -> bool:
    """Whether `text` is a DNS-1123 label (a namespace, a container's name)."""
    return len(text) <= MAX_LABEL and DNS_LABEL.match(text) is not None


def is_dns_subdomain(text: str) -> bool:
    """Whether `text` is a DNS-1123 subdomain (most objects' metadata.name)."""
    return len(text) <= MAX_SUBDOMAIN and DNS_SUBDOMAIN.match(text) is not None


def keda_hpa_name(scaled_object: str) -> str:
    """The name KEDA gives the HPA it makes for the ScaledObject `scaled_object` (when the
    object names none in advanced.horizontalPodAutoscalerConfig.name)."""
    return f"keda-hpa-{scaled_object}"


def keda_name_problems(scaled_object: str, hpa_name: str | None = None) -> list[str]:
    """Why KEDA's webhook refuses the names of a ScaledObject named `scaled_object` whose HPA is
    `hpa_name` (default: KEDA's own name for it): each one longer than KEDA_MAX_NAME."""
    hpa = hpa_name or keda_hpa_name(scaled_object)
    return [
        f"{what} {text!r} is longer than {KEDA_MAX_NAME} characters ({len(text)})"
        for what, text in (("scaledobject name", scaled_object), ("HPA name", hpa))
        if len(text) > KEDA_MAX_NAME
    ]
