"""The effect properties: what reached the world, per job, and when.

Pure functions of a :class:`~core.history.History`, like ``properties/checks.py``. They judge
every send in the execution log (``History.effects``): the job body's own (no key: the world
takes every one) and a relay's deliveries of committed outbox rows (keyed: the world takes a key
once and acknowledges a repeat without doing it again, ``core.world``). A send without a key is
taken every time.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

from ..core.events import LogEvent
from ..core.history import Effect, History
from .checks import by_job, overlap, plural, who
from .core import Mark, Result, decides, held, violated

RETRY_ADVICE = "retries re-send: make the effect idempotent"


def _keyed_by_job(effects: list[Effect]) -> dict[int, dict[str, list[Effect]]]:
    out: dict[int, dict[str, list[Effect]]] = defaultdict(lambda: defaultdict(list))
    for e in effects:
        if e.key is not None:
            out[e.job][e.key].append(e)
    return out


def accepted_for(sends: list[Effect]) -> int:
    """How many of one key's *sends* the world took: its ``accepted`` answers, and at least one when
    none was answered at all (a sender that died between its send and the answer may have
    landed it: counted, never assumed away)."""
    return max(sum(e.answer == LogEvent.ACCEPTED for e in sends), 1 if sends else 0)


@decides("at-most-once-effects", group="safety", position=4)
def at_most_once_effects(h: History, name: str) -> Result:
    """Violated by every job whose effects the world *accepted* more than once: every send without
    a key, and per idempotency key the world's acceptances (:func:`accepted_for`). Classified as
    overlap (two effect-bearing executions live at once: fencing keeps late writes out of the
    database, not out of the world), retry after the effect (no retrying design avoids it without
    an idempotent effect; the evidence then says so), or several keys for one job's effect.
    Count: jobs."""
    effects = h.effects()
    keyed = _keyed_by_job(effects)
    execs_by_job = by_job(h.executions())
    lines = []
    jobs = []
    retried = False
    first = None
    total = repeats = 0
    for job in sorted(set(execs_by_job) | set(keyed)):
        sent = [ex for ex in execs_by_job.get(job, []) if ex.effects]  # the body's own, keyless
        keys = keyed.get(job, {})
        n_body = sum(ex.effects for ex in sent)
        n_keyed = sum(accepted_for(s) for s in keys.values())
        repeats += sum(len(s) for s in keys.values()) - n_keyed
        n = n_body + n_keyed
        total += n
        if n <= 1:
            continue
        if n_keyed and len(keys) > 1:
            kind = f"{len(keys)} idempotency keys for one job: {', '.join(sorted(keys))}"
        elif n_keyed and n_body:
            kind = "sent with and without a key"
        elif n_keyed:
            kind = f"the world accepted key {next(iter(keys))} {plural(n_keyed, 'time')}"
        elif any(overlap(h, a, b) > 0 for a, b in combinations(sent, 2)):
            kind = "overlap: " + ", ".join(who(ex) for ex in sent)
        elif len(sent) > 1:
            kind = "retry after the effect: " + ", ".join(who(ex) for ex in sent)
            retried = True
        else:
            kind = "one execution: " + ", ".join(who(ex) for ex in sent)
        lines.append(f"job {job} sent {n} effects ({kind})")
        jobs.append(job)
        times = sorted((t, ex.worker, ex.attempt) for ex in sent for t in ex.effect_times)
        if first is None and len(times) > 1:  # the event: the body's second effect of the job
            t, worker, attempt = times[1]
            first = Mark(t, "effect", worker, job,
                         f"job {job}'s effect sent again ({worker} attempt {attempt})")
    if lines:
        return violated(name, lines, jobs, suffix=f"; {RETRY_ADVICE}" if retried else "", event=first)
    if not effects:
        return held(name, "vacuous: no execution sent an effect")
    again = f"; {plural(repeats, 'repeated send')} acknowledged, not done again" if repeats else ""
    return held(name, f"{plural(total, 'effect')} accepted, at most one per job{again}")


@decides("no-stale-effect", group="safety", position=12)
def no_stale_effect(h: History, name: str) -> Result:
    """Violated by every execution that sent its external effect after another execution of the
    same job had started (a newer claim): a zombie's effect, which a lease check right before the
    effect prevents; and by every relay delivery of an attempt's effect after a newer attempt of
    the job had started. A retry after the effect is ``at-most-once-effects``' business. Count:
    offending executions and deliveries."""
    lines = []
    jobs = []
    marks = []
    sent = 0
    groups = by_job(h.executions())
    for job, execs in sorted(groups.items()):
        for ex in execs:
            sent += len(ex.effect_times)
            last_sent = max(ex.effect_times, default=ex.start)
            newer = [o for o in execs if o is not ex and ex.start < o.start < last_sent]
            if not newer:
                continue
            first = min(newer, key=lambda o: o.start)
            late = max(ex.effect_times) - first.start
            lines.append(f"job {job}: {who(ex)} sent its effect {late * 1000:.0f} ms after {who(first)} "
                         "started")
            jobs.append(job)
            marks.append(Mark(max(ex.effect_times), "effect", ex.worker, job,
                              f"job {job}: {who(ex)} sends its effect after {who(first)} started"))
    for e in (e for e in h.effects() if e.key is not None):
        sent += 1
        newer = [o for o in groups.get(e.job, []) if e.attempt is not None and o.attempt > e.attempt
                 and o.start < e.t]
        if newer:
            first = min(newer, key=lambda o: o.start)
            lines.append(f"job {e.job}: {e.worker} delivered attempt {e.attempt}'s effect {e.key} "
                         f"{(e.t - first.start) * 1000:.0f} ms after {who(first)} started")
            jobs.append(e.job)
            marks.append(Mark(e.t, "effect", e.worker, e.job, f"job {e.job}: attempt {e.attempt}'s effect "
                                                               f"delivered after {who(first)} started"))
    if lines:
        return violated(name, lines, jobs, event=marks[0])
    if not sent:
        return held(name, "vacuous: no execution sent an effect")
    return held(name, f"{plural(sent, 'effect')}, none after a newer attempt started")

