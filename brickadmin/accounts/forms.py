from functools import cache
from zoneinfo import available_timezones

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from . import webhooks


@cache
def zone_names() -> tuple[str, ...]:
    """The IANA zone names this machine knows (sorted), read once."""
    return tuple(sorted(available_timezones()))


def zone_choices():
    # None chosen: the browser's zone (its cookie), else the site's display zone.
    default = [("", _("Your browser's time zone (else %(zone)s)") % {"zone": settings.TIME_ZONE_DISPLAY})]
    return default + [(name, name) for name in zone_names()]


def language_choices():
    return [("", _("The language you use the console in"))] + [(code, name) for code, name in settings.LANGUAGES]


class PreferenceForm(forms.Form):
    # A ChoiceField: only a name among zoneinfo.available_timezones() (or "") is accepted.
    time_zone = forms.ChoiceField(
        label=_("Time zone"),
        choices=zone_choices,
        required=False,
        help_text=_("Every time in the console is shown in this zone, with its name."),
    )
    language = forms.ChoiceField(label=_("Language of notifications"), choices=language_choices, required=False)
    email_notifications = forms.BooleanField(
        label=_("Also by email"),
        required=False,
        widget=forms.CheckboxInput(attrs={"aria-describedby": "help-email_notifications"}),
        help_text=_("Every notification is shown here in the console; this also sends it to your email address."),
    )
    # http(s) only: the worker posts Slack-compatible JSON there (Mattermost accepts it too).
    webhook_url = forms.URLField(
        label=_("Also to a chat webhook"),
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=_("A Slack or Mattermost incoming webhook URL (https://...); leave empty for none."),
    )

    def __init__(self, *args, has_email: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        if not has_email:
            # Nowhere to send it: off and not to be turned on. A disabled field ignores what is
            # posted (a tampered form included) and keeps its initial value, so off is what is saved.
            field = self.fields["email_notifications"]
            field.disabled = True
            self.initial["email_notifications"] = False
            field.help_text = _(
                "Your account has no email address: add one first (an administrator can, or your sign-in "
                "provider gives it at your next sign-in); this can be turned on then."
            )

    def clean_webhook_url(self):
        url = self.cleaned_data.get("webhook_url", "")
        refused = url and webhooks.refusal(url, settings.BRICK_WEBHOOK_ALLOWED_HOSTS)
        if refused:
            raise forms.ValidationError(refused)
        return url
