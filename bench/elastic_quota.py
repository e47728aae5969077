"""Elastic quota benchmark: a day of Workload arrivals on a simple model of one GPU cohort,
fixed quotas against a guarantee and a burst ceiling (Kueue's nominalQuota and borrowingLimit,
with reclaimWithinCohort), printing idle guaranteed GPU-hours and guarantee violations.

The model, minute by minute over one day (deterministic for a seed):

- a cohort of ``--gpus`` GPUs shared by ``--workspaces`` Workspaces, each guaranteed an equal
  part (the guarantees add up to the GPUs: nothing overcommitted);
- each Workspace submits Workloads at its own rate through the day (a busy team, a steady one,
  one busy at night, idle ones), each asking for 1, 2 or 4 GPUs for a while (exponential, mean
  ``--mean-minutes``); a Workspace's queue is first in, first out;
- **fixed**: a Workload is admitted when its Workspace's GPUs in use plus its own fit the quota
  (the guarantee): today's ResourceQuota;
- **elastic**: admitted when they fit guarantee + burst and the cohort has the GPUs free; a
  Workload that fits its Workspace's guarantee but finds no free GPU takes them back from
  Workspaces over their guarantee (the newest borrowed Workload first), as Kueue's
  ``reclaimWithinCohort: Any`` does; a preempted Workload goes back to the front of its queue
  and starts over (its work so far is lost and counted).

Printed per policy: idle guaranteed GPU-hours (a guaranteed GPU neither used by its Workspace
nor lent to another), idle GPU-hours while Workloads waited, the mean and the 95th percentile
wait of the Workloads admitted, those still waiting when the days end, Workloads preempted and
the GPU-hours of work they lost, and guarantee violations (a Workload that fitted its
Workspace's guarantee but was not admitted within ``--grace`` minutes). No cluster, no
database: the figures are the model's, for the benchmarks guide.

    .venv/bin/python bench/elastic_quota.py [--gpus 16] [--workspaces 4] [--load 1] [--seed 1] [--days 1]
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass, field

MINUTES = 24 * 60
SIZES = (1, 1, 1, 2, 2, 4)  # GPUs a Workload asks for, drawn uniformly


@dataclass
class Workload:
    ws: int
    gpus: int
    minutes: int  # the work it needs
    arrived: int
    fits_guarantee: bool = False  # when it arrived, its Workspace's use plus it fitted the guarantee
    started: int | None = None
    done: int = 0  # minutes of work done since it last started
    admitted_at: int | None = None  # first admission (its wait)


@dataclass
class Result:
    policy: str
    idle_guaranteed: float = 0.0  # GPU-hours
    idle_while_waiting: float = 0.0  # GPU-hours
    waits: list[int] = field(default_factory=list)
    preempted: int = 0
    lost: float = 0.0  # GPU-hours of work started over
    violations: int = 0
    finished: int = 0
    borrowed: float = 0.0  # GPU-hours used above a guarantee
    unstarted: int = 0  # Workloads still waiting when the day ends


def rate(ws: int, minute: int) -> float:
    """Arrivals per minute of Workspace ``ws`` at ``minute`` of the day: a busy team by day, a
    steady one, one busy at night, and idle ones (a Workload every few hours)."""
    hour = (minute // 60) % 24
    kind = ws % 4
    if kind == 0:
        return 0.06 if 8 <= hour < 20 else 0.01
    if kind == 1:
        return 0.03
    if kind == 2:
        return 0.06 if hour >= 20 or hour < 6 else 0.005
    return 0.004


def arrivals(workspaces: int, days: int, mean: float, seed: int, load: float = 1.0) -> list[Workload]:
    rng = random.Random(seed)
    out = []
    for minute in range(days * MINUTES):
        for ws in range(workspaces):
            if rng.random() < load * rate(ws, minute):
                out.append(Workload(ws, rng.choice(SIZES), max(1, int(rng.expovariate(1 / mean))), minute))
    return out


def simulate(policy: str, work: list[Workload], gpus: int, workspaces: int, burst: int, grace: int) -> Result:
    guarantee = gpus // workspaces
    ceiling = guarantee if policy == "fixed" else guarantee + burst
    queues: list[list[Workload]] = [[] for _ in range(workspaces)]
    running: list[Workload] = []
    result = Result(policy)
    todo = sorted((Workload(**{**w.__dict__}) for w in work), key=lambda w: w.arrived)
    end = max((w.arrived for w in todo), default=0) // MINUTES * MINUTES + MINUTES  # the days' last minute
    i = 0
    minute = 0
    while minute < end:
        for w in [w for w in running if w.started is not None and minute - w.started >= w.minutes]:
            running.remove(w)
            result.finished += 1
        used = [sum(w.gpus for w in running if w.ws == ws) for ws in range(workspaces)]
        while i < len(todo) and todo[i].arrived == minute:
            w = todo[i]
            w.fits_guarantee = used[w.ws] + sum(x.gpus for x in queues[w.ws]) + w.gpus <= guarantee
            queues[w.ws].append(w)
            i += 1
        _admit(policy, queues, running, used, gpus, guarantee, ceiling, minute, result)
        waiting = [w for q in queues for w in q]
        free = gpus - sum(used)
        # a guaranteed GPU is idle when its Workspace does not use it and no one borrows it
        result.idle_guaranteed += max(0, workspaces * guarantee - sum(used)) / 60
        if waiting:
            result.idle_while_waiting += free / 60
        result.borrowed += sum(max(0, u - guarantee) for u in used) / 60
        result.violations += sum(1 for w in waiting if w.fits_guarantee and minute - w.arrived == grace)
        minute += 1
    result.unstarted = sum(len(q) for q in queues)
    return result


def _admit(policy, queues, running, used, gpus, guarantee, ceiling, minute, result) -> None:
    progress = True
    while progress:
        progress = False
        for ws, queue in enumerate(queues):
            if not queue:
                continue
            w = queue[0]
            if used[ws] + w.gpus > ceiling:
                continue
            free = gpus - sum(used)
            if free < w.gpus and policy == "elastic" and used[ws] + w.gpus <= guarantee:
                free += _reclaim(running, queues, used, guarantee, w.gpus - free, minute, result)
            if free < w.gpus:
                continue
            queue.pop(0)
            w.started = minute
            if w.admitted_at is None:
                w.admitted_at = minute
                result.waits.append(minute - w.arrived)
            running.append(w)
            used[ws] += w.gpus
            progress = True


def _reclaim(running, queues, used, guarantee, need, minute, result) -> int:
    """Take back borrowed GPUs, the newest borrowed Workload first, from Workspaces over their
    guarantee (never below it). Returns the GPUs freed."""
    freed = 0
    for w in sorted(running, key=lambda w: -(w.started or 0)):
        if freed >= need:
            break
        if used[w.ws] <= guarantee:  # only a Workspace borrowing now gives back
            continue
        running.remove(w)
        used[w.ws] -= w.gpus
        freed += w.gpus
        result.preempted += 1
        result.lost += w.gpus * (minute - (w.started or minute)) / 60
        w.started = None
        queues[w.ws].insert(0, w)
    return freed


def pct(values: list[int], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, math.ceil(p * len(ordered)) - 1)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--workspaces", type=int, default=4)
    ap.add_argument("--burst", type=int, default=0, help="burst ceiling per Workspace (0: the other guarantees)")
    ap.add_argument("--mean-minutes", type=float, default=60.0)
    ap.add_argument("--grace", type=int, default=1, help="minutes a Workload within its guarantee may wait")
    ap.add_argument("--load", type=float, default=1.0, help="every Workspace's arrival rate times this")
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    guarantee = args.gpus // args.workspaces
    burst = args.burst or args.gpus - guarantee
    work = arrivals(args.workspaces, args.days, args.mean_minutes, args.seed, args.load)
    print(
        f"{args.gpus} GPUs, {args.workspaces} Workspaces guaranteed {guarantee} each, burst ceiling {burst}; "
        f"{len(work)} Workloads over {args.days} day(s) (seed {args.seed}, load {args.load:g}, "
        f"mean {args.mean_minutes:.0f} min)"
    )
    results = [simulate(p, work, args.gpus, args.workspaces, burst, args.grace) for p in ("fixed", "elastic")]
    print(
        f"{'policy':<8} {'idle guaranteed GPU-h':>22} {'idle while waiting GPU-h':>25} {'borrowed GPU-h':>15} "
        f"{'mean wait min':>14} {'p95 wait min':>13} {'still waiting':>14} {'preempted':>10} {'lost GPU-h':>11} "
        f"{'violations':>11}"
    )
    for r in results:
        mean = sum(r.waits) / len(r.waits) if r.waits else 0.0
        print(
            f"{r.policy:<8} {r.idle_guaranteed:>22.1f} {r.idle_while_waiting:>25.1f} {r.borrowed:>15.1f} "
            f"{mean:>14.1f} {pct(r.waits, 0.95):>13.0f} {r.unstarted:>14d} {r.preempted:>10d} {r.lost:>11.1f} "
            f"{r.violations:>11d}"
        )
    fixed, elastic = results
    if fixed.idle_guaranteed:
        print(f"idle guaranteed GPU-hours: {100 * (1 - elastic.idle_guaranteed / fixed.idle_guaranteed):.0f} % fewer")


if __name__ == "__main__":
    main()
