"""What happened, kept as a message code and its parameters, said in the reader's language.

A record (a run's step event, its outcome, an audit decision) keeps its text as written
(in LANGUAGE_CODE, for exports and for rows written before codes) and, beside it, the
message as ``{"code": ..., "params": {...}}``. Pages render that at display time with
``render()``, in the language of the request, so a run started by an English-speaking admin
reads in Korean to a Korean one and the other way round.

The codes map to gettext_lazy templates in ``PHRASES``: a plain dict, filled when the apps are
ready (each app's ``AppConfig.ready()`` registers its own). A parameter may itself be a
message (rendered first, in the same language) or a ``{"step": key, "text": ...}`` reference
to a step of the run (its title in the reader's language, when the caller knows it). A code
nobody registered any more, or parameters that no longer fit its template, render as None:
the caller shows the text as written.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.utils.functional import Promise

# The ways texts are put together (joined()): no words of their own, so no translation.
JOINS = {"\n": "text.lines", " ": "text.sentences", "; ": "text.items", ", ": "text.list"}
PHRASES: dict[str, Promise | str] = {code: "%(first)s" + sep + "%(rest)s" for sep, code in JOINS.items()}


def register(phrases: Mapping[str, Promise | str]) -> None:
    PHRASES.update(phrases)


class Said:
    """A message in no language yet: its code and parameters. ``str()`` says it in the active
    language; ``as_record()`` is what is stored."""

    __slots__ = ("code", "params")

    def __init__(self, code: str, **params):
        self.code, self.params = code, params

    def as_record(self) -> dict:
        return {"code": self.code, "params": {k: _param_record(v) for k, v in self.params.items()}}

    def __str__(self) -> str:
        text = render(self.as_record())
        return text if text is not None else self.code

    def __repr__(self) -> str:
        return f"Said({self.code!r}, {self.params!r})"

    # Where a text was a string (pre-checks shown on the plan page and in the terminal), a
    # message still compares by what it records and is searched in the words it says now.
    def __eq__(self, other) -> bool:
        return isinstance(other, Said) and self.as_record() == other.as_record()

    def __hash__(self) -> int:
        return hash(repr(self.as_record()))

    def __contains__(self, text: str) -> bool:
        return text in str(self)


def said(code: str, **params) -> Said:
    if code not in PHRASES:
        raise KeyError(f"no message registered for {code!r}")
    return Said(code, **params)


def joined(parts, sep: str = "\n"):
    """Texts put one after the other (lines, sentences or items: a key of JOINS), the empty ones
    left out. Plain text when none is a message; else a message, so each part is still said in
    the reader's language."""
    parts = [p for p in parts if p is not None and str(p) != ""] if parts else []
    if not any(isinstance(p, Said) for p in parts):
        return sep.join(str(p) for p in parts)
    text = parts[-1]
    for part in reversed(parts[:-1]):
        text = Said(JOINS[sep], first=part, rest=text)
    return text


def _param_record(value):
    if isinstance(value, Said):
        return value.as_record()
    if isinstance(value, Mapping) and isinstance(value.get("code"), str):  # a message as stored
        return dict(value)
    if isinstance(value, StepRef):
        return {"step": value.key, "text": str(value.text)}
    if isinstance(value, Promise):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


class StepRef:
    """A parameter naming a step of the run: its title, said in the reader's language."""

    __slots__ = ("key", "text")

    def __init__(self, key: str, text):
        self.key, self.text = key, text

    def __str__(self) -> str:
        return str(self.text)


def record_of(value) -> dict | None:
    """What to store beside a text: the message when the text is one, else None."""
    return value.as_record() if isinstance(value, Said) else None


def render(record, step_titles: Mapping[str, str] | None = None) -> str | None:
    """The message of a record in the active language; None when it cannot be said (no
    record, an unknown code, parameters that do not fit)."""
    if not isinstance(record, Mapping) or not isinstance(record.get("code"), str):
        return None
    template = PHRASES.get(record["code"])
    if template is None:
        return None
    params = record.get("params")
    if not isinstance(params, Mapping):
        return None
    values = {}
    for name, value in params.items():
        if isinstance(value, Mapping) and "code" in value:
            value = render(value, step_titles)
            if value is None:
                return None
        elif isinstance(value, Mapping) and "step" in value:
            value = (step_titles or {}).get(value["step"]) or value.get("text", "")
        values[name] = value
    try:
        # the template itself formats: a plural (ngettext_lazy) picks its form from the values
        text = str(template % values) if values or "%(" in str(template) else str(template)
    except (KeyError, TypeError, ValueError):
        return None
    return text.strip()  # an empty last parameter ("… %(where)s") leaves no trailing space


def shown(record, text: str, step_titles: Mapping[str, str] | None = None) -> str:
    """The record said in the reader's language, else the text as written."""
    rendered = render(record, step_titles)
    return text if rendered is None else rendered
