from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator


class LoginForm(AuthenticationForm):
    """Django's form sets the username's max_length on the widget only: a longer name still
    reached authenticate(), and django-axes then failed to record it (varchar 255) with a 500
    on PostgreSQL. Here it is a field error and nothing is authenticated."""

    def __init__(self, request=None, *args, **kwargs):
        super().__init__(request, *args, **kwargs)
        field = self.fields["username"]
        field.validators.append(MaxLengthValidator(field.max_length))
