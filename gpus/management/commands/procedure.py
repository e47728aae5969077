"""The conversion procedures from a terminal, writing the same records as the wizards.

  manage.py procedure plan A --node dev-a1-ws04
  manage.py procedure run A --node dev-a1-ws04 --actor ops [--inline] [--follow]
  manage.py procedure run C --replicas 4 --follow
  manage.py procedure run D --node gpu-new-01 --sharing none --confirm-checklist --inline
  manage.py procedure follow 12
  manage.py procedure resume 12 [--inline] [--follow]
  manage.py procedure cancel 12
  manage.py procedure list [--node N]
  manage.py procedure reap

Without --inline the run is enqueued for the Celery worker (as from the web).
Exit status: 0 succeeded (or enqueued), 1 failed/cancelled/interrupted/refused.
"""

import getpass
import time

from django import forms
from django.core.management.base import BaseCommand, CommandError
from django.utils.choices import CallableChoiceIterator

from gpus.forms import WizardForm
from gpus.models import ACTIVE_STATUSES, ProcedureRun
from gpus.procedures import engine, registry, service

MARK = {"pending": "·", "running": "▶", "succeeded": "✓", "failed": "✗", "skipped": "–", "cancelled": "⊘"}


class Command(BaseCommand):
    help = "Plan, run, follow, resume or cancel a procedure (a conversion, a MIG layout, a Fix), or list runs."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        for name in ("plan", "run"):
            p = sub.add_parser(name)
            procedures = registry.all_procedures()
            # argparse formats help with %: a label's own % is escaped
            named = "; ".join(str(proc.label).replace("%", "%%") for proc in procedures)
            p.add_argument("procedure", choices=[proc.code for proc in procedures], help=named)
            p.add_argument("--node", default="")
            self._add_param_flags(p)
            if name == "run":
                p.add_argument("--actor", default="", help="name recorded as the actor (default: OS user)")
                p.add_argument("--inline", action="store_true", help="execute here instead of the Celery worker")
                p.add_argument("--follow", action="store_true")
        for name in ("follow", "resume", "cancel"):
            p = sub.add_parser(name)
            p.add_argument("run_id", type=int)
            if name == "resume":
                p.add_argument("--actor", default="")
                p.add_argument(
                    "--confirm-checklist",
                    action="store_true",
                    help="D stopped at its checklist: the driver and runtime are installed now",
                )
                p.add_argument("--inline", action="store_true")
                p.add_argument("--follow", action="store_true")
            if name == "cancel":
                p.add_argument("--actor", default="")
        p = sub.add_parser("list")
        p.add_argument("--node", default="")
        p.add_argument("--limit", type=int, default=20)
        sub.add_parser("reap")

    @staticmethod
    def _add_param_flags(parser):
        """One flag per parameter any procedure declares (the same name shared by two
        procedures is one flag); the values are validated by the wizard's form."""
        seen = set()
        for proc in registry.all_procedures():
            for param in proc.params:
                if param.flag in seen:
                    continue
                seen.add(param.flag)
                field = param.field()
                label = f"{proc.code}: {field.label}"
                if isinstance(field, forms.BooleanField):
                    parser.add_argument(param.flag, dest=param.name, action="store_true", help=label)
                elif isinstance(field, forms.ChoiceField) and isinstance(field.choices, CallableChoiceIterator):
                    # read from the cluster (M's layouts): the form checks the value when the
                    # command runs, so --help answers without a cluster or a migrated database
                    parser.add_argument(param.flag, dest=param.name, help=label)
                elif isinstance(field, forms.ChoiceField):
                    parser.add_argument(param.flag, dest=param.name, choices=[c for c, _l in field.choices], help=label)
                else:
                    parser.add_argument(param.flag, dest=param.name, help=label)

    def handle(self, *args, **opts):
        return getattr(self, "do_" + opts["action"])(opts)

    # --- helpers -----------------------------------------------------------------
    def _params(self, o):
        proc = registry.get(o["procedure"])
        data = {"node": o["node"]}
        for p in proc.params:
            value = o.get(p.name)
            if value not in (None, False):
                data[p.name] = "on" if value is True else value
        form = WizardForm(proc, data)
        if not form.is_valid():
            flags = {"node": "--node", **{p.name: p.flag for p in proc.params}}
            problems = "; ".join(f"{flags.get(name, name)}: {' '.join(errors)}" for name, errors in form.errors.items())
            raise CommandError(f"procedure {proc.code}: {problems}")
        if proc.fixes and not proc.listed:  # a Fix: completed from the records as on its plan page
            from gpus.view.live import LiveRead

            return service.fix_params(proc, o["node"], form.params(), LiveRead())
        return form.params()

    def _actor(self, o):
        return o.get("actor") or f"{getpass.getuser()} (terminal)"

    def _get(self, run_id):
        try:
            return ProcedureRun.objects.get(pk=run_id)
        except ProcedureRun.DoesNotExist:
            raise CommandError(f"no run #{run_id}") from None

    def _print_event(self, e):
        mark = MARK.get(e.state, "?")
        attempt = f" (attempt {e.attempt})" if e.attempt > 1 else ""
        self.stdout.write(f"#{e.seq:<3} {mark} {e.state:<9} {e.numbered_title}{attempt}")
        if e.state == "running" and e.kubectl:
            self.stdout.write(f"       $ {e.kubectl}")
        for text in (e.output, e.error):
            for line in (text or "").splitlines():
                self.stdout.write(f"       {line}")

    def _follow(self, run_id, after=0, poll=0.3):
        while True:
            run = self._get(run_id)
            for e in run.steps.filter(seq__gt=after).order_by("seq"):
                self._print_event(e)
                after = e.seq
            if run.status not in ACTIVE_STATUSES and after >= run.last_seq:
                return self._outcome(run)
            time.sleep(poll)

    def _outcome(self, run):
        style = self.style.SUCCESS if run.status == "succeeded" else self.style.ERROR
        self.stdout.write(style(f"run #{run.pk}: {run.status}. {run.message}"))
        if run.status != "succeeded":
            raise SystemExit(1)

    def _refused(self, exc):
        link = f" (run #{exc.active.pk}: manage.py procedure follow {exc.active.pk})" if exc.active else ""
        self.stderr.write(self.style.ERROR(f"refused: {exc.message}{link}"))
        raise SystemExit(1)

    # --- actions -----------------------------------------------------------------
    def do_plan(self, o):
        from gpus.view.live import LiveRead

        code, params = o["procedure"], self._params(o)
        self.stdout.write(f"Procedure {code} on {o['node'] or 'the time-slicing nodes'} {params}")
        self.stdout.write("Pre-check:")
        proc_flags = {p.name: p.flag for p in registry.get(code).params}
        for c in registry.get(code).prechecks(LiveRead(), o["node"], params):
            self.stdout.write(f"  [{c.level}] {c.detail}")
            for item in c.items:
                self.stdout.write(f"         - {item}")
            if c.ack_label:
                self.stdout.write(f"         {c.ack_label} ({proc_flags.get(c.ack, '')} {c.ack_count or ''})".rstrip())
            if c.fix and c.level == "block":
                self.stdout.write(f"         to fix: {c.fix}")
        self.stdout.write("Steps:")
        for i, (step, title, kubectl) in enumerate(engine.plan(code, o["node"], params)):
            self.stdout.write(f"  {i}. {title}" + (f"  [skipped: {step.skip_reason}]" if step.skip_reason else ""))
            if kubectl:
                self.stdout.write(f"      $ {kubectl}")

    def do_run(self, o):
        code, params = o["procedure"], self._params(o)
        try:
            run = service.start_run(
                code, o["node"], params, actor_name=self._actor(o), source="terminal", dispatch=not o["inline"]
            )
        except service.RunRefused as exc:
            return self._refused(exc)
        self.stdout.write(f"run #{run.pk} created" + ("" if o["inline"] else " and enqueued for the worker"))
        self._continue(run, o)

    def _continue(self, run, o):
        if o["inline"]:
            engine.execute(run.pk)
            return self._follow(run.pk)
        if o["follow"]:
            return self._follow(run.pk)

    def do_follow(self, o):
        self._follow(self._get(o["run_id"]).pk)

    def do_resume(self, o):
        run = self._get(o["run_id"])
        try:
            if o.get("confirm_checklist"):
                service.confirm_checklist(run, actor_name=self._actor(o), dispatch=not o["inline"])
            else:
                service.resume_run(run, actor_name=self._actor(o), dispatch=not o["inline"])
        except service.RunRefused as exc:
            return self._refused(exc)
        self.stdout.write(f"run #{run.pk} resumed")
        self._continue(run, o)

    def do_cancel(self, o):
        run = service.cancel_run(self._get(o["run_id"]), actor_name=self._actor(o))
        self.stdout.write(f"run #{run.pk}: {run.status}{' (cancel requested)' if run.cancel_requested else ''}")

    def do_list(self, o):
        qs = ProcedureRun.objects.all()
        if o["node"]:
            qs = qs.filter(node=o["node"])
        for r in qs[: o["limit"]]:
            self.stdout.write(
                f"#{r.pk:<5} {r.procedure} {r.node or 'cluster':<20} {r.status:<11} {r.actor_name:<20} "
                f"{r.created_at:%Y-%m-%d %H:%M:%S}"
            )

    def do_reap(self, o):
        reaped = engine.reap_stale()
        self.stdout.write(f"interrupted: {reaped or 'none'}")
