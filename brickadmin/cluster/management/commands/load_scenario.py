from django.core.management.base import BaseCommand, CommandError

from brickadmin.cluster import scenarios
from brickadmin.cluster.twin import TwinGateway


class Command(BaseCommand):
    help = "Replace the simulated cluster (twin) with a scenario: a name in scenarios/ or a YAML path."

    def add_arguments(self, parser):
        parser.add_argument("scenario")

    def handle(self, *args, scenario, **options):
        try:
            objects, hardware, plugin_configs = scenarios.read(scenario)
        except scenarios.ScenarioError as exc:
            raise CommandError(str(exc)) from exc
        TwinGateway().load(objects, hardware, plugin_configs)
        nodes = sum(1 for o in objects if o["kind"] == "Node")
        self.stdout.write(
            self.style.SUCCESS(
                f"Loaded scenario {scenario}: {len(objects)} objects, {nodes} nodes, "
                f"{sum(len(g) for g in hardware.values())} physical GPUs."
            )
        )
