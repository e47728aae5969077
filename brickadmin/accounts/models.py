"""What each person chooses for themselves: today the time zone the console shows times in."""
from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Preference(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    # A zoneinfo name (the form checks it against zoneinfo.available_timezones()); "" = the server's TIME_ZONE.
    time_zone = models.CharField(_("Time zone"), max_length=64, blank=True, default="")

    def __str__(self):
        return f"{self.user} {self.time_zone or '(server)'}"
