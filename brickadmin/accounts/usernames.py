"""Which usernames an account may have. A username is read by people (the audit records,
the approval queue, the owner label of a namespace), so two names that look the same must
not be two accounts: `аdmin` with a Cyrillic `а` or `admin` with a Greek omicron would pass
for the break-glass `admin`. (Fullwidth `ａｄｍｉｎ` is already `admin` to Django, whose forms
and User.clean fold usernames with NFKC; the uniqueness check then refuses it.)

Unicode's own answer (UTS #39: NFKC, one script per name, the confusables skeleton) needs
its confusables table, which Python does not ship. The console's people are Korean and
English speakers, so the rule is a short list instead: ASCII letters and digits, Django's
`.`, `@`, `+`, `-` and `_`, and precomposed Hangul syllables (U+AC00 to U+D7A3, e.g. 김민지).
No Hangul syllable looks like an ASCII character; the Hangul letters that do (the
compatibility jamo `ㅇ`, `ㅣ`) and every other script are refused. The rule applies to local
accounts (Django's admin, createsuperuser) and to the names single sign-on gives its users
(a provider name outside it falls back to the subject)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.utils.deconstruct import deconstructible
from django.utils.translation import gettext_lazy as _

# One character class repeated: unambiguous.
ALLOWED_USERNAME = r"^[A-Za-z0-9.@+_\-\uac00-\ud7a3]+\Z"


@deconstructible
class LookAlikeSafeUsernameValidator(RegexValidator):
    regex = ALLOWED_USERNAME
    message = _(
        "Enter a username of ASCII letters, digits, Korean syllables and . @ + - _ only: letters of other "
        "scripts or fullwidth forms can look like another account's name."
    )
    code = "look_alike_username"
    flags = 0


def is_look_alike_safe(name: str) -> bool:
    try:
        LookAlikeSafeUsernameValidator()(name)
    except ValidationError:
        return False
    return True


def install() -> None:
    """Every form and command that validates the User model's username applies the rule."""
    from django.contrib.auth import get_user_model

    field = get_user_model()._meta.get_field("username")
    if not any(isinstance(v, LookAlikeSafeUsernameValidator) for v in field.validators):
        field.validators.append(LookAlikeSafeUsernameValidator())
