"""Append-only audit rows: written once, never changed or deleted through the ORM.

One guard for every audit record (procedure step events, Workspace decisions): a model
derives from ``AppendOnlyModel``; saving an existing row, deleting a row, and queryset
``update()`` / ``delete()`` raise ``AppendOnlyViolation``. Retention pruning that must
remove old rows uses ``QuerySet._raw_delete`` on purpose (see ProcedureRun.prune).
"""

from __future__ import annotations

from django.db import models


class AppendOnlyViolation(Exception):
    """An attempt to edit or delete a row of an append-only audit record."""


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyViolation(self.model.append_only_message)

    def delete(self):
        raise AppendOnlyViolation(self.model.append_only_message)


class AppendOnlyModel(models.Model):
    """Abstract base: rows are inserted once and never updated or deleted."""

    append_only_message = "audit records are append-only"

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyViolation(self.append_only_message)
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyViolation(self.append_only_message)
