"""The notices of a Workspace as its reader meets them: one card per question to the owner
with its history (the question, the answer, the quota change it led to), every other notice a
card of its own, each headed in words ("root asked on 6 Dec · answer by 13 Dec", "You released
4 GPUs"), attributed to the person who acted, "You" when that is the reader, dated in the
reader's zone and language."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

QUESTION = "reclaim-ask"


@dataclass
class Entry:
    at: datetime
    heading: str
    message: str


@dataclass
class Card:
    at: datetime  # the latest entry's: cards are shown newest first
    heading: str
    entries: list[Entry] = field(default_factory=list)
    question: int | None = None  # the question's id, for a card about one


def day(value: date | datetime) -> str:
    """ "6 Dec" in the reader's language and zone."""
    if isinstance(value, datetime):
        value = timezone.localtime(value)
    return date_format(value, pgettext("a day in a notice's heading", "j M"))


def question_of(notice) -> tuple[int | None, str]:
    """(question id, what happened: asked / keep / release / reclaimed) of a question's notice
    ("reclaim-ask:3:keep"); (None, "") for any other."""
    kind, _sep, rest = (notice.subject or "").partition(":")
    number, _sep, state = rest.partition(":")
    if kind != QUESTION or not number.isascii() or not number.isdigit():
        return None, ""
    return int(number), state


def asked_heading(ask, reader: str) -> str:
    facts = {"who": ask.asked_by_name, "day": day(ask.asked_at), "due": day(ask.deadline)}
    if ask.asked_by_name == reader:
        return _("You asked on %(day)s · answer by %(due)s") % facts
    return _("%(who)s asked on %(day)s · answer by %(due)s") % facts


def answer_heading(state: str, notice, ask, reader: str) -> str:
    """One step of a question's history, said of whoever took it."""
    who = (ask.answered_by_name if state in ("keep", "release") and ask is not None else "") or notice.actor_name
    you = bool(who) and who == reader
    if state == "asked":  # the card's heading has the dates
        return _("You asked") if you else _("%(who)s asked") % {"who": who or "?"}
    if state == "keep":
        until = day(ask.keep_until) if ask is not None and ask.keep_until else "?"
        if you:
            return _("You keep the GPUs until %(until)s") % {"until": until}
        return _("%(who)s keeps the GPUs until %(until)s") % {"who": who or "?", "until": until}
    if state == "release":
        n = ask.released if ask is not None else 0
        if you:
            return ngettext("You released %(n)d GPU", "You released %(n)d GPUs", n) % {"n": n}
        return ngettext("%(who)s released %(n)d GPU", "%(who)s released %(n)d GPUs", n) % {"who": who or "?", "n": n}
    if state == "reclaimed":
        if you:
            return _("You reclaimed the GPU quota on %(day)s") % {"day": day(notice.created_at)}
        return _("%(who)s reclaimed the GPU quota on %(day)s") % {"who": who or "?", "day": day(notice.created_at)}
    return _("A question about the GPUs")


def single_heading(notice, reader: str) -> str:
    """A notice that is no question's: what happened and who did it, dated."""
    kind, _sep, rest = (notice.subject or "").partition(":")
    when = day(notice.created_at)
    if kind == "quota":
        if notice.actor_name and notice.actor_name == reader:
            return _("You changed the GPU quota on %(day)s") % {"day": when}
        return _("%(who)s changed the GPU quota on %(day)s") % {"who": notice.actor_name or "?", "day": when}
    if kind == "kueue":
        return _("Kueue stopped a workload on %(day)s") % {"day": when}
    if "/" in (notice.subject or ""):  # a Fix's notice about one pod: namespace/pod
        return _("Pod %(pod)s · %(day)s") % {"pod": notice.subject.partition("/")[2], "day": when}
    return f"{notice.subject} · {when}"


def cards(notices, asks: dict, reader: str) -> list[Card]:
    """``notices`` (any order) as cards, newest first; ``asks``: the questions by id (a notice
    of a question deleted since is shown on its own). A quota change a question led to (the
    owner's release, the admin's reclaim) joins that question's card."""
    by_run = {a.quota_run_id: a.pk for a in asks.values() if a.quota_run_id}
    questions: dict[int, Card] = {}
    out: list[Card] = []
    for n in sorted(notices, key=lambda n: (n.created_at, n.pk)):
        number, state = question_of(n)
        if number is None and n.run_id in by_run and (n.subject or "").startswith("quota:"):
            number, state = by_run[n.run_id], "quota"
        ask = asks.get(number) if number is not None else None
        if ask is None:
            heading = single_heading(n, reader) if number is None else answer_heading(state, n, None, reader)
            out.append(Card(n.created_at, heading, [Entry(n.created_at, heading, n.shown_message)]))
            continue
        card = questions.get(ask.pk)
        if card is None:
            card = questions[ask.pk] = Card(n.created_at, asked_heading(ask, reader), question=ask.pk)
            out.append(card)
        heading = single_heading(n, reader) if state == "quota" else answer_heading(state, n, ask, reader)
        card.entries.append(Entry(n.created_at, heading, n.shown_message))
        card.at = max(card.at, n.created_at)
    return sorted(out, key=lambda c: c.at, reverse=True)


def for_workspace(namespace: str, reader, limit: int = 20) -> list[Card]:
    """The cards of ``namespace``'s latest ``limit`` notices, for ``reader`` (a user)."""
    from gpus.models import OwnerNotice

    from .models import ReclaimAsk

    notices = list(OwnerNotice.objects.filter(namespace=namespace)[:limit])
    numbers = {number for n in notices if (number := question_of(n)[0]) is not None}
    runs = {n.run_id for n in notices if n.run_id}
    asks = {a.pk: a for a in ReclaimAsk.objects.filter(namespace=namespace, pk__in=numbers)}
    asks.update({a.pk: a for a in ReclaimAsk.objects.filter(namespace=namespace, quota_run_id__in=runs)})
    return cards(notices, asks, reader.get_username())
