"""pg-job-chaos's orchestration layer: everything that runs a schedule and shows what it found.

The base layer (:mod:`core`: errors, SQL files, the schedule, the history, the execution log,
process helpers) sits under :mod:`faults` (the catalogue), :mod:`workers` (the designs and tenant
modes) and :mod:`properties` (the invariants). This package sits on top of them all, and nothing
below imports it. Its parts, lowest first (``tests/unit/test_layers.py`` keeps the order):

* :mod:`harness.net` carries the network faults (a fault proxy per worker; nftables partitions);
* :mod:`harness.postgres` provisions a database (a throwaway server of version 15 or 17, a DSN, or a
  container; optionally PgBouncer in front of it) with the article's data; :mod:`harness.janitor`
  removes everything if the harness is killed;
* the **supervisor** (:mod:`harness.supervisor`) forks **worker** processes, each running one
  **design** with one **tenant mode**, strikes the schedule's supervisor **faults** at named points,
  restarts the dead, and samples ``pg_stat_activity``;
* the **search engine** (:mod:`harness.engine`) looks for a schedule that violates a **property** and
  shrinks it, given a function that runs one; it compares designs too;
* the **runner** (:mod:`harness.runner`) turns one **schedule** into one **history**; :mod:`harness.slots`
  runs several at once; :mod:`harness.session` is what a command runs on;
* :mod:`harness.report` builds one **report** per command and renders it (text, JSON, JUnit, HTML);
* :mod:`harness.experiments` reproduces the article's measurements, :mod:`harness.bench` prints the
  benchmark figures, and :mod:`harness.cli` is the command line.

Nothing is imported here: ``python -m pg_job_chaos.harness.janitor`` must start without the
provisioning stack.
"""
