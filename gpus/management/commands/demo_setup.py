from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

DEMO_ACCOUNTS = [
    # username, password, is_staff
    ("admin", "brick-admin-demo", True),
    ("alice", "brick-alice-demo", False),
    ("bob", "brick-bob-demo", False),
]


class Command(BaseCommand):
    help = "Prepare the demo: migrate, load a scenario into the twin, create demo accounts (demo only)."

    def add_arguments(self, parser):
        parser.add_argument("--scenario", default="demo")
        parser.add_argument("--keep", action="store_true", help="keep the twin if it already holds a cluster")

    def handle(self, *args, scenario, keep, **options):
        from django.conf import settings

        if not settings.DEBUG or settings.BRICK_CLUSTER != "twin":
            # It creates accounts with published passwords and replaces the twin.
            raise CommandError("demo_setup is for the demo only (DJANGO_DEBUG=1 and the simulated cluster).")
        from brickadmin.cluster.models import TwinObject

        call_command("migrate", verbosity=0)
        if not (keep and TwinObject.objects.exists()):
            call_command("load_scenario", scenario, stdout=self.stdout)
            self._manage_the_loaded_manifest()
        User = get_user_model()
        for username, password, staff in DEMO_ACCOUNTS:
            user, _ = User.objects.get_or_create(username=username)
            user.is_staff = staff
            user.set_password(password)
            user.save()
        self.stdout.write("Demo accounts:")
        for username, password, staff in DEMO_ACCOUNTS:
            self.stdout.write(f"  {username:6} / {password}   ({'cluster admin' if staff else 'user'})")

    def _manage_the_loaded_manifest(self):
        """The managed device-plugin manifest starts as the file; a scenario may run other
        replicas. Record a version that matches it, so the demo starts without drift."""
        from brickadmin.cluster import NotFound
        from brickadmin.cluster.gateway import get_gateway
        from brickadmin.cluster.vocabulary import PLUGIN_NAMESPACE, TS_CONFIGMAP
        from gpus import manifest

        try:
            live = get_gateway().get_configmap(PLUGIN_NAMESPACE, TS_CONFIGMAP)
        except NotFound:
            return
        replicas = manifest.ts_replicas([live])
        current = manifest.current()
        if replicas and manifest.ts_replicas(manifest.parse(current.content)) != replicas:
            manifest.save_version(
                manifest.set_replicas(current.content, replicas),
                actor_name="demo setup",
                note=f"replicas {replicas}, as in the loaded scenario",
            )
