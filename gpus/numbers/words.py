"""The numbers' words in the reader's language, without importing Django.

The pure modules mark their text as Django's would (``_("...")``, ``gettext_lazy("...")``, so
``makemessages`` finds it) but call these functions, which translate through whatever
``install`` was given: Django's translation, installed by ``GpusConfig.ready()``. Without it
(a pure test, a script) the text is the English it was written in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any


@contextmanager
def _no_override(code: str) -> Iterator[None]:
    yield


_translate: Callable[[str], str] = str
_override: Callable[[str], AbstractContextManager[Any]] = _no_override


def install(translate: Callable[[str], str], override: Callable[[str], AbstractContextManager[Any]]) -> None:
    """Translate through ``translate`` (gettext) in the language ``override(code)`` makes active."""
    global _translate, _override
    _translate, _override = translate, override


def gettext(message: str) -> str:
    return _translate(message)


def override(code: str) -> AbstractContextManager[Any]:
    """Speak ``code`` inside the block (Django's ``translation.override``, once installed)."""
    return _override(code)


class LazyText:
    """A message translated each time it is read, in the language active then (a check's title
    is written once at import and read in every reader's language)."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __str__(self) -> str:
        return _translate(self.message)

    def __repr__(self) -> str:
        return f"LazyText({self.message!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyText):
            return self.message == other.message
        return isinstance(other, str) and str(self) == other

    def __hash__(self) -> int:
        return hash(self.message)

    def __mod__(self, args: Any) -> str:
        said: str = str(self) % args
        return said

    def __add__(self, other: str) -> str:
        return str(self) + other

    def __radd__(self, other: str) -> str:
        return other + str(self)

    def __len__(self) -> int:
        return len(str(self))

    def __bool__(self) -> bool:
        return bool(self.message)


# What a check's title or an entry's help is: text, or text translated when it is read.
Text = str | LazyText


def gettext_lazy(message: str) -> LazyText:
    return LazyText(message)
