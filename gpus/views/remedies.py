"""The presenter of a finding's remedies: its links and the procedures that fix it, for the
pure health checks (gpus/numbers/health.py), which name procedures by code only."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.urls import reverse

from gpus.numbers.health import MANIFEST, NODE, Problem
from gpus.procedures import registry


class PageRemedies:
    def subject_url(self, problem: Problem) -> str:
        if problem.subject_type == NODE:
            return str(reverse("node_detail", args=[problem.subject]))
        if problem.subject_type == MANIFEST:
            return str(reverse("manifest"))
        return ""

    def fix_url(self, problem: Problem) -> str:
        proc = registry.find(problem.wizard)
        return proc.pick_url(problem.node, problem.fix_params) if proc else ""

    def fix_plan_url(self, problem: Problem) -> str:
        proc = registry.find(problem.fix)
        return proc.fix_url(problem.node, problem.fix_params) if proc else ""

    def page_url(self, name: str) -> str:
        return str(reverse(name))

    def fixers(self, kind: str, params: dict[str, Any], subject: str) -> Iterable[tuple[str, bool, dict[str, Any]]]:
        for proc, facts in registry.fixers(kind, params, subject):
            yield proc.code, proc.listed, facts

    def waits_for_checklist(self, run: Any) -> bool:
        """Whether a stopped run waits at a manual step of its procedure's build checklist."""
        proc = registry.find(run.procedure)
        return bool(
            proc is not None
            and proc.checklist
            and run.current_step in {s.key for s in proc.steps(run.params or {}) if s.manual}
        )
