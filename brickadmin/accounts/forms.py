from functools import cache
from zoneinfo import available_timezones

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _


@cache
def zone_names() -> tuple[str, ...]:
    """The IANA zone names this machine knows (sorted), read once."""
    return tuple(sorted(available_timezones()))


def zone_choices():
    default = [("", _("The server's time zone (%(zone)s)") % {"zone": settings.TIME_ZONE})]
    return default + [(name, name) for name in zone_names()]


class PreferenceForm(forms.Form):
    # A ChoiceField: only a name among zoneinfo.available_timezones() (or "") is accepted.
    time_zone = forms.ChoiceField(label=_("Time zone"), choices=zone_choices, required=False,
                                  help_text=_("Every time in the console is shown in this zone, with its name."))
