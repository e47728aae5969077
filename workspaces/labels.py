"""The labels the product puts on a Workspace's namespace: pure, so the directory, the
services and the Fixes that re-create a namespace name owners the same way."""

from __future__ import annotations

import re

from django.conf import settings

from brickadmin.cluster.vocabulary import (
    OWNER_LABEL,
    POD_SECURITY_ENFORCE_LABEL,
    POD_SECURITY_WARN_LABEL,
    WORKSPACE_LABEL,
)

LABEL_VALUE_BAD = re.compile(r"[^A-Za-z0-9._-]")


def owner_label_value(username: str) -> str:
    """A username as a valid label value (≤ 63 of [A-Za-z0-9._-], alphanumeric at both
    ends): Django allows '@' and '+' in usernames, Kubernetes label values do not."""
    value = LABEL_VALUE_BAD.sub("_", username)[:63].strip("._-")
    return value or "unknown"


def namespace_labels(username: str) -> dict[str, str]:
    """The labels of a Workspace's namespace: the Workspace mark, its owner and, unless the
    site turned it off, the Pod Security level its pods are held to (``baseline`` by default:
    no privileged containers, host namespaces or hostPath volumes; GPUs still work)."""
    labels = {WORKSPACE_LABEL: "true", OWNER_LABEL: owner_label_value(username)}
    level = settings.BRICK_WORKSPACE_POD_SECURITY
    if level:
        labels[POD_SECURITY_ENFORCE_LABEL] = level
        labels[POD_SECURITY_WARN_LABEL] = level
    return labels
