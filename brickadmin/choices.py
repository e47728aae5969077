"""Choices that carry their meaning: value, colour and label in one place."""

from __future__ import annotations

from django.db import models

TAGS = ("ok", "warn", "bad", "")  # the colour classes of a ``tag`` badge (static/ CSS)


class TaggedChoices(models.TextChoices):
    """TextChoices whose members also carry the colour of their badge::

        class RunStatus(TaggedChoices):
            RUNNING = "running", "warn", _("Running")   # value, tag, label

    ``member.tag`` is "ok", "warn", "bad" or "" (neutral). Stored values and labels are
    those of plain TextChoices (the tag is not part of ``choices``: no migration)."""

    def __new__(cls, value, tag=""):
        if tag not in TAGS:
            raise ValueError(f"unknown tag {tag!r} for {value!r}: one of {TAGS}")
        member = str.__new__(cls, value)
        member._value_ = value
        member.tag = tag
        return member

    @classmethod
    def tag_of(cls, value) -> str:
        """The tag of a stored value ("" for a value that is not a member)."""
        try:
            return cls(value).tag
        except ValueError:
            return ""
