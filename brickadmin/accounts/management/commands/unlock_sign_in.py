"""Unlock a username locked out of the sign-in form (django-axes), from every address or
one: the way back in for the break-glass account when no admin can sign in to the console."""

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Unlock a username's sign-in (from every address, or from --address only)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--address", default=None, help="only the lockout from this client address")

    def handle(self, *args, username, address, **options):
        from axes.models import AccessAttempt

        attempts = AccessAttempt.objects.filter(username=username)
        if address:
            attempts = attempts.filter(ip_address=address)
        addresses = sorted(set(attempts.values_list("ip_address", flat=True)))
        attempts.delete()
        if addresses:
            self.stdout.write(f"{username}: unlocked from {', '.join(a or '?' for a in addresses)}.")
        else:
            self.stdout.write(
                f"{username}: no failed sign-ins recorded{' from ' + address if address else ''}; nothing to unlock."
            )
