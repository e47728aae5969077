"""Leader election over a ``coordination.k8s.io/v1`` Lease, like client-go's leaderelection.

Two ``watch_cluster`` replicas run; the one holding the Lease is active, the other waits.
The holder renews every ``retry_period``; if it cannot renew for ``renew_deadline`` it
gives up leadership (stops working) before the Lease can expire (``lease_duration``), so
two leaders never overlap as long as renew_deadline < lease_duration. A candidate takes
the Lease only when it has seen the same record unchanged for ``lease_duration`` on its
own clock (no trust in the other's clock), and writes are conditional on the
resourceVersion read (a lost race is a 409 Conflict: try again later). A standby reads a
Lease held by another several times per retry period and tries right as it expires, so it
takes over a Lease's duration after the last renewal it saw, not up to two polls later.

``token`` is the fencing token of the current leadership (the Lease's leaseTransitions
when this identity took it: every change of holder raises it), and ``holds()`` says
whether the last successful renewal is within renew_deadline: the view's writes check both
(gpus.view.publish.Fence), so a leader cut off from the API server stops writing before
its Lease can expire, and a write from a former leader is refused.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from datetime import UTC, datetime

from .base import ClusterError, Conflict, NotFound

log = logging.getLogger(__name__)


# A standby's attempt is made this long after the Lease it watches expires by its clock
# (a timer may fire a little early; an attempt before expiry would be wasted).
EXPIRY_MARGIN = 0.05
# While another holds the Lease, a standby reads it this many times per retry period: the
# duration counts from the renewal it last saw (client-go's observedTime, on the candidate's
# own clock), so a renewal seen late makes it take over that much later, and the takeover's
# claim and first publication must still fit in the one retry period the Lease allows past
# its duration (bench/chaos_watcher.py: a leader paused mid-publication, on a loaded machine,
# 4 looks per period: 16.7-17.7 s after the last renewal). Reads only (a GET of one Lease,
# 5 a second); it writes only once the Lease expired.
OBSERVATIONS_PER_RETRY = 10


def next_attempt_in(retry_wait: float, expires_in: float | None) -> float:
    """Seconds until a candidate's next look at the Lease: its (jittered) retry period when
    nobody else holds it (``expires_in`` None); while another holds it, a fraction of that
    (OBSERVATIONS_PER_RETRY), and no later than just after the Lease expires by the
    candidate's clock. Polling every retry period alone took over up to two retry periods
    after the Lease's duration (a renewal seen late, then the expiry seen late); client-go's
    isLeaseValid allows the takeover right when the duration since the last seen renewal ends."""
    if expires_in is None:
        return retry_wait
    return min(retry_wait / OBSERVATIONS_PER_RETRY, max(expires_in, 0.0) + EXPIRY_MARGIN)


def _micro_time(dt: datetime | None = None) -> str:
    return (dt or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        gateway,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
        clock=time.monotonic,
    ):
        if not renew_deadline < lease_duration:
            raise ValueError("renew_deadline must be shorter than lease_duration")
        self.gateway, self.namespace, self.name, self.identity = gateway, namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.clock = clock
        self._observed_spec: dict | None = None
        self._observed_at = 0.0
        self._warned = ""  # the last lasting refusal logged (said once, not every retry)
        self._last_renew = 0.0  # clock() of the last successful acquire/renew
        self.is_leader = False
        self.token = -1  # leaseTransitions of the Lease this identity holds (its fencing token)

    # ------------------------------------------------------------------ one attempt
    def try_acquire_or_renew(self) -> bool:
        """One attempt (client-go's tryAcquireOrRenew). True when this identity holds the Lease."""
        now = self.clock()
        spec_new = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": _micro_time(),
            "renewTime": _micro_time(),
            "leaseTransitions": 0,
        }
        try:
            lease = self.gateway.get_lease(self.namespace, self.name)
        except NotFound:
            try:
                self.gateway.create_lease(
                    self.namespace, {"metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec_new}
                )
            except Conflict as exc:  # the other replica made it first: read next time
                log.info("lease %s/%s: create failed: %s", self.namespace, self.name, exc)
                return self._lost()
            except ClusterError as exc:
                why = f"lease {self.namespace}/{self.name}: cannot create it: {exc}"
                if isinstance(exc, NotFound):  # the namespace is missing: nothing will lead until it exists
                    why += (
                        f" (the namespace {self.namespace} must exist: it is the chart's release namespace; "
                        "set BRICK_LEASE_NAMESPACE to another one). No watcher can lead, so no view is published."
                    )
                self._warn_once(why)
                return self._lost()
            return self._won(now, 0)
        except ClusterError as exc:
            log.warning("lease %s/%s: cannot read: %s", self.namespace, self.name, exc)
            return self._lost()

        spec = dict(lease.get("spec") or {})
        if spec != self._observed_spec:
            self._observed_spec, self._observed_at = spec, now
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now < self._observed_at + duration:
            return self._lost()  # held by another, not expired (by our clock)
        if holder == self.identity:
            spec_new["acquireTime"] = spec.get("acquireTime") or spec_new["acquireTime"]
            spec_new["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
        else:
            spec_new["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        body = {
            "metadata": {
                k: v
                for k, v in lease["metadata"].items()
                if k in ("name", "namespace", "resourceVersion", "labels", "annotations")
            },
            "spec": spec_new,
        }
        try:
            updated = self.gateway.update_lease(self.namespace, body)
        except ClusterError as exc:  # Conflict: someone wrote in between
            log.info("lease %s/%s: update failed: %s", self.namespace, self.name, exc)
            return self._lost()
        self._observed_spec, self._observed_at = dict(updated.get("spec") or spec_new), now
        return self._won(now, int(spec_new["leaseTransitions"]))

    def _warn_once(self, why: str) -> None:
        """A lasting refusal, said once (not at every retry) until it changes or the Lease is won."""
        if why != self._warned:
            log.warning("%s", why)
            self._warned = why

    def _won(self, now: float, token: int) -> bool:
        self._warned = ""
        if not self.is_leader:
            log.info("lease %s/%s: %s is the leader (token %s)", self.namespace, self.name, self.identity, token)
        self.is_leader, self._last_renew, self.token = True, now, token
        return True

    def holds(self) -> bool:
        """Leading, and renewed within renew_deadline (by this process's clock): past it the
        Lease may be taken by another soon, so nothing is written in its name."""
        return self.is_leader and self.clock() - self._last_renew < self.renew_deadline

    def _attempt(self) -> bool:
        """try_acquire_or_renew, where any failure (not only the API's) counts as not held."""
        try:
            return self.try_acquire_or_renew()
        except Exception:  # noqa: BLE001  (e.g. the twin's database restarting: try again later)
            log.exception("lease %s/%s: attempt failed", self.namespace, self.name)
            if getattr(self.gateway, "name", "") == "twin":
                from django.db import connection

                connection.close()  # the twin's Lease lives in the database: reconnect next time
            return False

    def _lost(self) -> bool:
        return False

    def expires_in(self) -> float | None:
        """Seconds until the Lease another holds expires by this candidate's clock (the
        record seen unchanged for its duration); None when nobody else holds it."""
        spec = self._observed_spec or {}
        if (spec.get("holderIdentity") or "") in ("", self.identity):
            return None
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        return self._observed_at + duration - self.clock()

    # ------------------------------------------------------------------ loops
    def acquire(self, stop: threading.Event) -> bool:
        """Block until this identity leads (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            if self._attempt():
                return True
            stop.wait(next_attempt_in(self.retry_period * random.uniform(1.0, 1.2), self.expires_in()))
        return False

    def keep(self, stop: threading.Event, lost: threading.Event) -> None:
        """Renew every retry_period until ``stop``; set ``lost`` (and return) when renewal
        has failed for renew_deadline. Run it in a thread beside the work."""
        while not stop.wait(self.retry_period):
            if self._attempt():
                continue
            if self.clock() - self._last_renew >= self.renew_deadline:
                log.warning(
                    "lease %s/%s: %s could not renew for %ss: leadership lost",
                    self.namespace,
                    self.name,
                    self.identity,
                    self.renew_deadline,
                )
                self.is_leader = False
                lost.set()
                return

    def raise_token(self, floor: int) -> bool:
        """Lift leaseTransitions to ``floor`` while this identity holds the Lease (a Lease
        deleted and created again counts from 0, below the tokens the view has seen); a
        conditional write, so it fails when another took the Lease meanwhile."""
        try:
            lease = self.gateway.get_lease(self.namespace, self.name)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return False
            spec.update(leaseTransitions=max(int(spec.get("leaseTransitions") or 0), floor), renewTime=_micro_time())
            version = lease["metadata"].get("resourceVersion")
            md = {"name": self.name, "namespace": self.namespace, "resourceVersion": version}
            self.gateway.update_lease(self.namespace, {"metadata": md, "spec": spec})
        except ClusterError as exc:
            log.warning("lease %s/%s: raising the token failed: %s", self.namespace, self.name, exc)
            return False
        self.token = int(spec["leaseTransitions"])
        return True

    def release(self) -> bool:
        """Give the Lease up (holder cleared, duration 1 s) so a standby takes over at once."""
        if not self.is_leader:
            return False
        self.is_leader = False
        try:
            lease = self.gateway.get_lease(self.namespace, self.name)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return False
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time())
            self.gateway.update_lease(
                self.namespace,
                {
                    "metadata": {
                        "name": self.name,
                        "namespace": self.namespace,
                        "resourceVersion": lease["metadata"].get("resourceVersion"),
                    },
                    "spec": spec,
                },
            )
            return True
        except ClusterError as exc:
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, exc)
            return False
