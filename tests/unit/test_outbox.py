"""lease-outbox without a database: the world's keys, effects in the history, the effect
properties on relay deliveries, the server limits against the horizon threshold, relay points."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pg_job_chaos.core.execlog import ExecLog
from pg_job_chaos.core.schedule import JOB_POINTS, POINTS, RELAY_POINTS
from pg_job_chaos.core.world import World
from pg_job_chaos.faults import parse_faults
from pg_job_chaos.properties import HELD, VIOLATED
from pg_job_chaos.properties.health import HORIZON_LEASE_FRACTION
from pg_job_chaos.properties.strategies import schedules
from pg_job_chaos.workers import DESIGNS
from pg_job_chaos.workers.builtin.outbox import bounded_dsn, cut_reason, effect_key, session_limits
from tests.unit.test_properties import execution, job, one, rec, sane


def relay_send(t, worker, job_id, attempt, answer="accepted", *, key=None, relay="relay") -> list[dict]:
    key = key or effect_key(job_id)
    out = [rec(t, worker, "effect", job_id, attempt, key=key, relay=relay)]
    if answer is not None:
        out.append(rec(t + 0.001, worker, answer, job_id, attempt, key=key, relay=relay))
    return out


def outboxed(*records) -> list[dict]:
    """Jobs 1 and 2 run once each without a body effect (the outbox design), then *records*."""
    return [*execution("w1.0", 1, 1, 1.0, 2.0, effect=False),
            *execution("w1.0", 2, 1, 2.0, 3.0, effect=False),
            *records]


# --- the world ---------------------------------------------------------------------------------------

def test_the_world_accepts_a_key_once_and_logs_both_sides(tmp_path):
    log = ExecLog(tmp_path / "w1.0.events.jsonl", "w1.0")
    world = World(tmp_path)
    assert world.send(log, job=1, attempt=1, key="job:1:effect:0") is True
    assert World(tmp_path).send(log, job=1, attempt=2, key="job:1:effect:0") is False  # another process
    assert world.send(log, job=2, attempt=1, key="job:2:effect:0") is True
    log.close()
    lines = (tmp_path / "w1.0.events.jsonl").read_text().splitlines()
    assert [__import__("json").loads(x)["event"] for x in lines] == [
        "effect", "accepted", "effect", "duplicate", "effect", "accepted"]


def test_history_effects_pair_sends_with_answers():
    h = sane(records=outboxed(*relay_send(2.1, "w1.0", 1, 1, answer=None),
                              *relay_send(3.5, "w1.1", 1, 1, "duplicate", relay="sweep")))
    effects = h.effects()
    assert [(e.job, e.worker, e.answer, e.relay) for e in effects] == [
        (1, "w1.0", None, "relay"), (1, "w1.1", "duplicate", "sweep")]
    assert all(ex.effects == 0 for ex in h.executions())  # keyed sends are not the body's


# --- at-most-once-effects on accepted effects -----------------------------------------------------------

def test_a_redelivery_the_world_acknowledges_is_one_effect():
    h = sane(records=outboxed(*relay_send(2.1, "w1.0", 1, 1),
                              *relay_send(3.5, "w1.1", 1, 1, "duplicate", relay="sweep"),
                              *relay_send(3.1, "w1.0", 2, 1)))
    result = one("at-most-once-effects", h)
    assert result.status == HELD
    assert result.evidence == \
        "2 effects accepted, at most one per job; 1 repeated send acknowledged, not done again"


def test_a_key_per_attempt_is_two_effects():
    h = sane(records=outboxed(*relay_send(2.1, "w1.0", 1, 1, key="job:1:attempt:1"),
                              *relay_send(3.5, "w1.1", 1, 2, key="job:1:attempt:2")))
    result = one("at-most-once-effects", h)
    assert (result.status, result.jobs) == (VIOLATED, (1,))
    assert "2 idempotency keys for one job" in result.evidence


def test_a_send_without_an_answer_counts_as_accepted():
    # The sender died between the send and the world's answer: it may have landed, so it counts...
    h = sane(records=outboxed(*relay_send(2.1, "w1.0", 1, 1, answer=None)))
    result = one("at-most-once-effects", h)
    assert result.status == HELD and result.evidence.startswith("1 effect accepted")
    # ...once: had it landed, the world would have answered the later send "duplicate", not "accepted".
    h = sane(records=outboxed(*relay_send(2.1, "w1.0", 1, 1, answer=None), *relay_send(3.5, "w1.1", 1, 1)))
    assert one("at-most-once-effects", h).status == HELD
    twice = sane(records=outboxed(*relay_send(2.1, "w1.0", 1, 1), *relay_send(3.5, "w1.1", 1, 1)))
    result = one("at-most-once-effects", twice)  # a world that broke its word is caught
    assert result.status == VIOLATED and "the world accepted key job:1:effect:0 2 times" in result.evidence


def test_sends_without_a_key_are_judged_as_before():
    h = sane(records=[*execution("w1.0", 1, 1, 0.0, None), *execution("w1.1", 1, 2, 3.0, 4.0)])
    assert "retry after the effect" in one("at-most-once-effects", h).evidence


# --- no-stale-effect on deliveries --------------------------------------------------------------------

def test_relay_deliveries_are_judged_not_vacuous():
    h = sane(records=outboxed(*relay_send(2.1, "w1.0", 1, 1)))
    result = one("no-stale-effect", h)
    assert result.status == HELD and result.evidence == "1 effect, none after a newer attempt started"


def test_delivering_an_old_attempts_effect_after_a_newer_claim_is_stale():
    records = [*execution("w1.0", 1, 1, 1.0, 1.4, effect=False),
               *execution("w2.0", 1, 2, 1.5, 2.0, effect=False),
               *relay_send(1.8, "w1.0", 1, 1)]
    result = one("no-stale-effect", sane(records=records, jobs=[job(1, attempts=2), job(2)]))
    assert (result.status, result.jobs) == (VIOLATED, (1,))
    assert "w1.0 delivered attempt 1's effect job:1:effect:0 300 ms after w2.0 attempt 2 started" in \
        result.evidence


# --- pool-hygiene: a session the server cut is a reconnect ---------------------------------------------

def test_pool_hygiene_budgets_a_server_cut_like_a_terminate():
    connects = [rec(i / 10, "w1.0", "connect", backend=i) for i in range(3)]
    assert one("pool-hygiene", sane(records=connects)).status == VIOLATED
    cut = rec(0.15, "w1.0", "session-cut", 1, 1, reason="idle-in-transaction timeout")
    assert one("pool-hygiene", sane(records=[*connects, cut])).status == HELD


# --- the design's pieces ----------------------------------------------------------------------------

def test_the_server_ends_a_transaction_before_horizon_calls_it_held():
    limits = session_limits(0.5)
    assert max(limits.values()) < HORIZON_LEASE_FRACTION * 0.5 * 1000
    assert limits == {"statement_timeout": 150, "idle_in_transaction_session_timeout": 150,
                      "transaction_timeout": 200}


def test_bounded_dsn_keeps_the_users_options():
    dsn = bounded_dsn("host=/tmp dbname=x options='-c search_path=a'", {"statement_timeout": 150})
    assert "search_path=a" in dsn and "statement_timeout=150" in dsn


def test_the_key_is_the_jobs_not_the_attempts():
    assert effect_key(7) == effect_key(7, 0) != effect_key(7, 1) != effect_key(8)


def test_cut_reason_from_sqlstate_or_text():
    class Cut(Exception):
        sqlstate = "25P03"

    assert cut_reason(Cut("x")) == "idle-in-transaction timeout"
    assert cut_reason(Exception("terminating connection due to transaction timeout")) == "transaction timeout"
    assert cut_reason(Exception("division by zero")) is None


def test_only_the_outbox_design_reaches_the_relay_points():
    assert "lease-outbox" in DESIGNS  # and so in compare's default set (harness/cli/commands.py)
    assert POINTS == JOB_POINTS + RELAY_POINTS
    assert DESIGNS["lease-outbox"].points == POINTS
    assert all(d.points == JOB_POINTS for n, d in DESIGNS.items() if n != "lease-outbox")


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_the_strategy_draws_relay_points_only_when_given(data):
    faults = parse_faults("crash,kill")
    s = data.draw(schedules(faults=faults, design="lease"))
    assert {j.point for j in s.jobs} | {e.point for e in s.events} <= {None, *JOB_POINTS}
    s = data.draw(schedules(faults=faults, design="lease-outbox", points=POINTS))
    assert {j.point for j in s.jobs} | {e.point for e in s.events} <= {None, *POINTS}
