"""Storage of the simulated cluster ("twin").

Kubernetes objects are kept whole, as the API server would return them, so the
web server and the Celery worker (separate processes) see one cluster.
"""

from django.db import models


class TwinObject(models.Model):
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=253, blank=True, default="")
    name = models.CharField(max_length=253)
    body = models.JSONField()
    # Denormalised for the field selectors and the ledger's hot path.
    node_name = models.CharField(max_length=253, blank=True, default="")
    holds_gpu = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "namespace", "name"], name="twin_object_unique")]
        indexes = [
            models.Index(fields=["kind", "node_name"]),
            models.Index(fields=["kind", "holds_gpu"]),
        ]

    def __str__(self):
        return f"{self.kind} {self.namespace}/{self.name}"


class TwinHardware(models.Model):
    """What the twin knows that Kubernetes does not: a node's physical GPUs and
    what its device plugin advertised when its current pod started."""

    node = models.CharField(max_length=253, unique=True)
    gpus = models.JSONField(default=list)  # [{"uuid", "model", "memoryMiB", "mig": [...]}]
    plugin_pod_uid = models.CharField(max_length=64, blank=True, default="")
    advertised = models.JSONField(null=True, blank=True)

    def __str__(self):
        return self.node


class TwinState(models.Model):
    """One row whose version changes (a fresh random value) on every write, so readers
    can cache a snapshot until the cluster changes, like an informer's resourceVersion.
    Random rather than a counter: a rolled-back write must not reuse a version."""

    version = models.CharField(max_length=32, default="")
    # The twin's resourceVersion: one counter for every write, as etcd's revision. Each
    # write of a TwinObject takes the next value (row-locked, so versions are assigned
    # and committed in order) and appends a TwinEvent with it.
    last_rv = models.BigIntegerField(default=0)
    # Events up to here were pruned (like etcd compaction): a watch from an older
    # version gets 410 Gone and must list again.
    compacted_rv = models.BigIntegerField(default=0)

    def __str__(self):
        return f"twin at resourceVersion {self.last_rv}"


class TwinEvent(models.Model):
    """Append-only: what a watch on the twin would deliver. Written in the same
    transaction as the TwinObject change it describes; ``id`` is the resourceVersion."""

    ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
    TYPES = [(t, t) for t in (ADDED, MODIFIED, DELETED)]

    id = models.BigIntegerField(primary_key=True)
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=253, blank=True, default="")
    name = models.CharField(max_length=253)
    type = models.CharField(max_length=8, choices=TYPES)
    body = models.JSONField()

    class Meta:
        indexes = [models.Index(fields=["kind", "id"])]

    def __str__(self):
        return f"{self.id} {self.type} {self.kind} {self.namespace}/{self.name}"
