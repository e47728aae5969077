from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator


def ascii_number(value, max_digits: int | None = 18) -> int | None:
    """A whole number given as text (a key, a version, a sequence number), or None: ASCII
    digits only and nothing else (callers strip spaces where they accept them), because "²"
    is a digit to str.isdigit() and int() reads "٣" or "３" as 3; at most ``max_digits`` of
    them, so that it fits the database's integer."""
    text = str(value if value is not None else "")
    if not (text.isascii() and text.isdigit()) or (max_digits is not None and len(text) > max_digits):
        return None
    return int(text)


class LoginForm(AuthenticationForm):
    """Django's form sets the username's max_length on the widget only: a longer name still
    reached authenticate(), and django-axes then failed to record it (varchar 255) with a 500
    on PostgreSQL. Here it is a field error and nothing is authenticated."""

    def __init__(self, request=None, *args, **kwargs):
        super().__init__(request, *args, **kwargs)
        field = self.fields["username"]
        field.validators.append(MaxLengthValidator(field.max_length))
