from django.apps import AppConfig


class GpusConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "gpus"

    def ready(self):
        # The built-in procedures, by code: the registry imports no definition (the
        # definitions import the models, which ask the registry for their choices).
        from .procedures import definitions, registry

        for proc in definitions.BUILT_IN:
            registry.register(proc)
        # The stopped runs' findings, handed to the cluster view's (which imports no procedure).
        from .procedures import findings

        findings.register()
        # The messages runs record as codes, said in each reader's language (brickadmin/wording.py).
        from brickadmin import wording

        from .procedures.phrases import PHRASES

        wording.register(PHRASES)
        # Register the Celery tasks in every process, not only the worker: runs are
        # enqueued by task name, and a registered task honours CELERY_TASK_ALWAYS_EAGER.
        from .tasks import execute_run, prune_old_runs, reap_stale_runs

        self.celery_tasks = (execute_run, prune_old_runs, reap_stale_runs)

        # The run page's stream is woken by a NOTIFY sent with each step row (PostgreSQL).
        from .run_stream import connect_signals

        connect_signals()

        # The pure numbers (gpus/numbers) import no Django: their words go through Django's
        # translation and their findings' links and fixes through the pages' presenter.
        from django.utils import translation

        from .numbers import health, words
        from .views.remedies import PageRemedies

        words.install(translation.gettext, translation.override)
        health.install_remedies(PageRemedies())
