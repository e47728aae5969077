"""Conversion procedures A-D (docs/operator-guide.md#procedures).

Layout
- base.py         Step / ProcedureDef / Check / Outcome: what a step is (title + kubectl
                  equivalent, idempotent ``ensure``, ``verify``).
- steps.py        the node steps shared by A, B and D (cordon, drain, label, plugin pod,
                  allocatable, status patch, no-stale, uncordon, Prometheus check).
- catalogue/      the built-in procedures, one module per family (conversions A, B, D; the
                  device plugin's C, P, T; MIG layout M; Restore R; the Fixes S, F, U; common):
                  ordered step lists, pre-checks, and what the pages and the terminal need
                  (label, description, parameters, nodes offered, checklist, lock).
- definitions.py  BUILT_IN, the built-in procedures GpusConfig.ready() registers.
- registry.py     the procedures by code; what everything outside this package asks.
- recording.py    record (one event per transaction, numbered per run), StepRecorder (one
                  step attempt, bound once), the plan and its pending rows, completed steps.
- engine.py       claim (conditional UPDATE), execute, retries with backoff, cancel, resume,
                  heartbeat.
- queue.py        enqueue a run by Celery task name (a queue failure marks the run failed).
- reaper.py       interrupted runs (stale heartbeat) and pending runs no worker claimed.
- service.py      start / resume / cancel / confirm-checklist: what the wizard views and the
                  ``procedure`` management command share.

Imports form a DAG (tests/gpus/test_import_graph.py): base <- steps <- catalogue <- definitions;
base <- registry <- recording <- queue <- reaper <- engine <- gpus/tasks.py; service uses
recording and queue. The registry imports no definition: GpusConfig.ready() registers
definitions.BUILT_IN, WorkspacesConfig.ready() the Workspace repair (workspaces/procedures.py).

The record: ProcedureRun (mutable status, heartbeat, cancel flag) + StepRun events
(append-only; every state change of a step is a new row with the run's next seq). The run
page renders the current state of each step from the latest row per step and polls
"after seq N" (htmx); a late or reconnecting browser catches up from the rows.
"""
