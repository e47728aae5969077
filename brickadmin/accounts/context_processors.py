def unread_notifications(request):
    """How many of one's notifications are unread (the header's count): a callable, so the
    one query runs only when a page shows it."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def count():
        from .models import Notification

        return Notification.objects.filter(recipient_id=user.pk, read_at__isnull=True).count()

    return {"unread_notifications": count}
