"""The personal settings page."""
from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from .forms import PreferenceForm
from .models import Preference


@require_http_methods(["GET", "POST"])
def profile(request):
    """Anyone signed in chooses their own time zone (nobody else's)."""
    pref = Preference.objects.filter(user=request.user).first()
    form = PreferenceForm(request.POST if request.method == "POST" else None,
                          initial={"time_zone": pref.time_zone if pref else ""})
    if request.method == "POST" and form.is_valid():
        Preference.objects.update_or_create(user=request.user, defaults={"time_zone": form.cleaned_data["time_zone"]})
        messages.success(request, _("Saved: times are now shown in %(zone)s.") % {
            "zone": form.cleaned_data["time_zone"] or _("the server's time zone")})
        return redirect("profile")
    return render(request, "accounts/profile.html", {"form": form},
                  status=400 if form.is_bound and form.errors else 200)
