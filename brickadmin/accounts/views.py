"""The personal settings page."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from brickadmin.permissions import admin_required

from .forms import PreferenceForm
from .models import Preference


@require_http_methods(["GET", "POST"])
def profile(request):
    """Anyone signed in chooses their own time zone and how they are notified (nobody else's)."""
    pref = Preference.objects.filter(user=request.user).first()
    form = PreferenceForm(
        request.POST if request.method == "POST" else None,
        initial={
            "time_zone": pref.time_zone if pref else "",
            "language": pref.language if pref else "",
            "email_notifications": pref.email_notifications if pref else True,
            "webhook_url": pref.webhook_url if pref else "",
        },
        has_email=bool(request.user.email),
    )
    if request.method == "POST" and form.is_valid():
        Preference.objects.update_or_create(
            user=request.user,
            defaults={k: form.cleaned_data[k] for k in ("time_zone", "language", "email_notifications", "webhook_url")},
        )
        messages.success(
            request,
            _("Saved: times are now shown in %(zone)s.")
            % {"zone": form.cleaned_data["time_zone"] or _("your browser's time zone")},
        )
        return redirect("profile")
    from .middleware import display_zone, zone_source

    source = zone_source(request)
    zone_words = {
        "chosen": _("the zone you chose"),
        "browser": _("your browser's time zone"),
        "site": _("the site's time zone until your browser reports its own (from the next page)"),
    }[source]
    return render(
        request,
        "accounts/profile.html",
        {"form": form, "zone_name": display_zone(request), "zone_words": zone_words, "zone_source": source},
        status=400 if form.is_bound and form.errors else 200,
    )


@require_http_methods(["GET", "POST"])
def notifications(request):
    """One's own notifications, newest first; opening the list marks them read (POST: all read)."""
    from django.conf import settings
    from django.core.paginator import Paginator
    from django.utils import timezone

    from .models import Notification

    mine = Notification.objects.filter(recipient=request.user)
    if request.method == "POST":
        mine.filter(read_at__isnull=True).update(read_at=timezone.now())
        return redirect("notifications")
    page = Paginator(mine.prefetch_related("deliveries"), settings.PAGE_SIZE).get_page(request.GET.get("page"))
    unread = {n.pk for n in page if n.read_at is None}
    response = render(request, "accounts/notifications.html", {"page": page, "unread": unread})
    if unread:
        Notification.objects.filter(pk__in=unread).update(read_at=timezone.now())
    return response


@require_http_methods(["GET"])
@admin_required
def deliveries(request):
    """Admins: emails and webhook posts that failed or are being retried (the action each
    tells of was not undone), newest first."""
    from django.conf import settings
    from django.core.paginator import Paginator

    from .models import Delivery

    rows = Delivery.objects.exclude(status=Delivery.Status.SENT).select_related("notification__recipient")
    page = Paginator(rows, settings.PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "accounts/deliveries.html", {"page": page})
