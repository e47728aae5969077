from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "brickadmin.cluster"
    label = "cluster"
    verbose_name = "Simulated cluster"
