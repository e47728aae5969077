"""The procedures the product offers, by code. Everything outside ``gpus/procedures/``
asks here (never compares a code): the pages, the forms, the terminal, the engine.
A plain dict, filled when the apps are ready: ``GpusConfig.ready()`` registers the built-in
ones ``definitions.BUILT_IN`` lists, ``WorkspacesConfig.ready()`` the Workspace repair; ``register()``
also adds a test's throw-away procedure (in that process only). It imports no definition,
so the models can ask it for their choices without importing the procedures."""

from __future__ import annotations

from .base import ProcedureDef, StepFailed

PROCEDURES: dict[str, ProcedureDef] = {}


def register(proc: ProcedureDef) -> ProcedureDef:
    PROCEDURES[proc.code] = proc
    return proc


def get(code: str) -> ProcedureDef:
    """The procedure with this code; StepFailed when there is none (the engine records it)."""
    try:
        return PROCEDURES[code]
    except KeyError:
        raise StepFailed(f"unknown procedure {code!r}") from None


def find(code: str) -> ProcedureDef | None:
    return PROCEDURES.get(code)


def fixers(kind: str, params: dict | None = None, subject: str = "") -> list[tuple[ProcedureDef, dict]]:
    """The procedures that fix a health finding of ``kind``, by code, each with the facts it
    runs with: the finding's own, and its subject as the parameter a procedure names in
    ``subject_param`` when the finding gives no value for it."""
    out = []
    for proc in all_procedures():
        facts = dict(params or {})
        if proc.subject_param and subject and not facts.get(proc.subject_param):
            facts[proc.subject_param] = subject
        if proc.fixes_finding(kind, facts):
            out.append((proc, facts))
    return out


def repair_codes() -> list[str]:
    """The codes of the fixes that neither cordon nor relabel a node (all unlisted fixes but
    "Restore the node"): a run of theirs does not stand for the node's last conversion."""
    return [p.code for p in all_procedures() if p.fixes and not p.listed and not p.restores]


def all_procedures() -> list[ProcedureDef]:
    return [PROCEDURES[c] for c in sorted(PROCEDURES)]


def choices() -> list[tuple[str, str]]:
    """(code, label) for model and form choices; evaluated when asked, so a procedure
    registered later (a test's throw-away one) is a choice too."""
    return [(p.code, p.label) for p in all_procedures()]


def headline(run) -> str:
    """What a run did, in words: its procedure's own ("Quota of ws-vision: 8 → 6"), else the
    procedure and its target."""
    proc = find(run.procedure)
    own = proc.headline(run) if proc is not None else ""
    return str(own) if own else f"{run.get_procedure_display()} — {run.target}"
