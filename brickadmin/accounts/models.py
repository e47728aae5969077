"""What each person chooses for themselves (the time zone times are shown in, the language
and the channels of their notifications) and the notifications they are sent."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Preference(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    # A zoneinfo name (the form checks it against zoneinfo.available_timezones());
    # "" = the browser's zone, else TIME_ZONE_DISPLAY.
    time_zone = models.CharField(_("Time zone"), max_length=64, blank=True, default="")
    # The language notifications are written in ("" = the one they read the console in, ui_language).
    language = models.CharField(_("Language of notifications"), max_length=8, blank=True, default="")
    # The language they last read the console in (the language menu's choice, else their browser's),
    # kept by brickadmin/accounts/middleware.py; "" = the site's LANGUAGE_CODE.
    ui_language = models.CharField(max_length=8, blank=True, default="")
    email_notifications = models.BooleanField(_("Also by email"), default=True)
    # A Slack- or Mattermost-compatible incoming webhook ("" = none).
    webhook_url = models.URLField(_("Also to a chat webhook"), max_length=500, blank=True, default="")

    def __str__(self):
        return f"{self.user} {self.time_zone or '(browser)'}"


class Notification(models.Model):
    """One message to one person, in their language, shown in the product whatever else
    carries it (email, webhook: a Delivery each)."""

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=40)  # workspace-approved, run-ended, fix-done, ...
    subject = models.CharField(max_length=300)
    body = models.TextField(blank=True, default="")
    link = models.CharField(max_length=500, blank=True, default="")  # a path in the product
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["recipient", "read_at"])]

    def __str__(self):
        return f"{self.kind} to {self.recipient_id}: {self.subject}"


class Delivery(models.Model):
    """A notification carried by email or a webhook, sent by the worker with retries. Its
    state is what admins see when a send fails (the action it tells of is never undone)."""

    class Channel(models.TextChoices):
        EMAIL = "email", _("Email")
        WEBHOOK = "webhook", _("Webhook")

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting to be sent")
        RETRYING = "retrying", _("Retrying")
        SENT = "sent", _("Sent")
        FAILED = "failed", _("Failed")

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=16, choices=Channel.choices)
    address = models.CharField(max_length=500)  # the email address or the webhook URL at the time
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["status", "updated_at"])]

    def __str__(self):
        return f"{self.channel} {self.status}: {self.notification_id}"
