"""Every Workspace of the cluster: the view's Workspace lines (gpus.view.reading.workspace_lines,
kept by the watcher) beside the product's records, and adoption of a namespace the product has
no record of.

The lists read the view in SQL (one query per page, whatever the number of Workspaces, no
API call); adoption reads the namespace's quotas live, since it writes a record from them.
"""

from __future__ import annotations

import math
from fractions import Fraction

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Exists,
    F,
    OuterRef,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce, NullIf
from django.utils import timezone
from django.utils.translation import gettext as _

from brickadmin.cluster.gateway import get_gateway
from brickadmin.cluster.vocabulary import NVIDIA_PREFIX, parse_quantity
from brickadmin.wording import said
from gpus.numbers import ledger as ledger_mod
from gpus.view import reading

from .labels import owner_label_value
from .models import Decision, WorkspaceRequest

RECORDED = (WorkspaceRequest.Status.APPROVED, WorkspaceRequest.Status.APPROVING)


def _record():
    # At most one: a name is held once by a pending, approving or approved request
    # (WorkspaceRequest's constraint workspace_name_held_once), so no order to pick by.
    return WorkspaceRequest.objects.filter(name=OuterRef("namespace"), status__in=RECORDED).order_by()


def lines():
    """Every namespace holding a GPU quota, with its record when there is one: ``adoptable``
    (no record) and ``owner_name`` (the record's requester, else the namespace's owner
    label). Sorted and searched in SQL. The record's requester is looked up by a subquery
    per row that is not selected itself (an alias): each figure built from it repeats it."""
    return (
        reading.workspace_lines()
        .filter(quota__gt=0)
        .alias(record_owner=Subquery(_record().values("requester_name")[:1], output_field=CharField()))
        .annotate(
            owner_name=Coalesce(F("record_owner"), NullIf(F("owner"), Value("")), output_field=CharField()),
            # a record's requester_name is never NULL: NULL here is no record
            adoptable=Case(
                When(record_owner__isnull=True, then=Value(True)), default=Value(False), output_field=BooleanField()
            ),
        )
        .defer("pods", "quotas", "gpu_quotas", "digest")  # no list shows these
    )


def held_without_record(user) -> list:
    """The namespaces of the cluster labelled as ``user``'s (the owner label approval writes)
    that the product has no approved record of: a user holds them even without a request
    (one query, from the view)."""

    recorded = WorkspaceRequest.objects.filter(name=OuterRef("namespace"), status__in=RECORDED)
    return list(
        reading.workspace_lines()
        .filter(owner=owner_label_value(user.get_username()))
        .exclude(Exists(recorded))
        .only("namespace", "resource", "gpu_type", "quota", "created_at")
        .order_by("namespace")
    )


def held_by_owner(usernames) -> dict[str, list]:
    """{username: the namespaces labelled as theirs, with a GPU quota} for these users (one
    query, from the view): what a requester already holds, beside a new request."""

    by_label: dict[str, list[str]] = {}
    for name in set(usernames):
        by_label.setdefault(owner_label_value(name), []).append(name)
    out: dict[str, list] = {}
    rows = (
        reading.workspace_lines()
        .filter(owner__in=list(by_label), quota__gt=0)
        .only("namespace", "owner", "resource", "quota")
    )
    for row in rows.order_by("namespace"):
        for name in by_label.get(row.owner, []):
            out.setdefault(name, []).append(row)
    return out


def owner_from_label(label: str):
    """The active user a namespace's owner label names, or None: the user of that name, else
    the one user whose name approval would have written as that label (``a@b`` is ``a_b``);
    several such users name nobody."""
    from django.contrib.auth import get_user_model

    if not label:
        return None
    users = get_user_model().objects.filter(is_active=True)
    exact = users.filter(username=label).first()
    if exact is not None:
        return exact
    # A label is a username with its characters outside [A-Za-z0-9._-] made "_": the same
    # length or, when cut at 63, longer. Compare in Python only the few of that first letter.
    found = [u for u in users.filter(username__istartswith=label[:1]) if owner_label_value(u.get_username()) == label]
    return found[0] if len(found) == 1 else None


def line(namespace: str):
    """The view's Workspace line of ``namespace``, or None."""
    return reading.workspace_line(namespace)


def record_of(namespace: str) -> WorkspaceRequest | None:
    return WorkspaceRequest.objects.filter(name=namespace, status__in=RECORDED).order_by("-id").first()


def measured() -> bool:
    """Whether the view's utilisation figures come from DCGM (Prometheus answered)."""
    return reading.usage_measured()


# --- adoption ------------------------------------------------------------------------


class AdoptionError(Exception):
    """Why a namespace cannot be adopted (shown to the admin beside the form)."""


def quantity(text, unit: int = 1) -> int:
    """A quota amount in whole ``unit``s, rounded up (500m CPU is 1; 8192Mi is 8 GiB; 1k
    is 1000); 0 when the quota does not name it. The cluster only holds valid quantities:
    anything else raises ValueError."""
    if text is None:
        return 0
    return math.ceil(Fraction(parse_quantity(str(text))) / unit)


def adoption_facts(namespace: str) -> dict:
    """What the record will say, from the namespace's quotas as the cluster has them now
    (live): GPU resource and amount, CPU, memory, storage. Raises AdoptionError, or
    ClusterError when the cluster cannot be read."""
    hard: dict[str, str] = {}
    for q in get_gateway().list_resource_quotas(namespace):
        for key, value in ((q.get("spec") or {}).get("hard") or {}).items():
            hard.setdefault(key, value)
    gpus = {
        k[len("requests.") :]: ledger_mod.quantity(v)
        for k, v in hard.items()
        if k.startswith("requests." + NVIDIA_PREFIX) and ledger_mod.quantity(v)
    }
    if not gpus:
        raise AdoptionError(_("Namespace %(ns)s holds no GPU quota in the cluster now.") % {"ns": namespace})
    if len(gpus) > 1:
        raise AdoptionError(
            _(
                "Namespace %(ns)s holds quota of several GPU resources (%(r)s): a Workspace has one "
                "GPU type. Split it first."
            )
            % {"ns": namespace, "r": ", ".join(sorted(gpus))}
        )
    ((resource, amount),) = gpus.items()
    return {
        "gpu_resource": resource,
        "gpu": amount,
        "gpu_type": ledger_mod.gpu_type_of(resource),
        "cpu": quantity(hard.get("requests.cpu") or hard.get("cpu")),
        "memory_gib": quantity(hard.get("requests.memory") or hard.get("memory"), 2**30),
        "storage_gib": quantity(hard.get("requests.storage"), 2**30),
    }


def adopt(namespace: str, owner, actor, note: str = "") -> WorkspaceRequest:
    """Record a namespace that holds a GPU quota as an approved Workspace of ``owner``, as
    its quotas are now; audited as a decision. Nothing is written to the cluster."""
    if record_of(namespace) is not None:
        raise AdoptionError(_("Workspace %(ns)s already has a record.") % {"ns": namespace})
    facts = adoption_facts(namespace)
    now = timezone.now()
    try:
        with transaction.atomic():
            req = WorkspaceRequest.objects.create(
                name=namespace,
                requester=owner,
                requester_name=owner.get_username(),
                status=WorkspaceRequest.Status.APPROVED,
                created_at=now,
                decided_at=now,
                decided_by=actor,
                decided_by_name=actor.get_username(),
                **facts,
            )
            Decision.objects.create(
                actor=actor,
                actor_name=actor.get_username(),
                action=Decision.Action.ADOPT,
                workspace=req,
                subject=namespace,
                gpu_resource=facts["gpu_resource"],
                amount=facts["gpu"],
                detail=adopted_detail(owner.get_username(), facts, note),
            )
    except IntegrityError:
        raise AdoptionError(
            _("A Workspace request named %(ns)s is pending: decide it first.") % {"ns": namespace}
        ) from None
    return req


def idle_window_hours() -> float:
    return float(settings.BRICK_IDLE_HOURS)


def adopted_detail(owner: str, facts: dict, note: str):
    """What an adoption records: the Workspace as the cluster holds it, and the admin's note."""
    adopted = said(
        "decision.adopted",
        owner=owner,
        r=facts["gpu_resource"],
        n=facts["gpu"],
        cpu=facts["cpu"],
        mem=facts["memory_gib"],
        st=facts["storage_gib"],
    )
    return said("decision.adopted_with_note", adopted=adopted, note=note) if note else adopted
