"""pg-job-chaos's orchestration layer: everything that runs a schedule and shows what it found.

The base layer (:mod:`core`: errors, SQL files, the schedule, the history, the execution log,
process helpers) sits under :mod:`faults` (the catalogue), :mod:`workers` (the designs and tenant
modes) and :mod:`properties` (the invariants). This package sits on top of them all, and nothing
below imports it:

* :mod:`harness.postgres` provisions a database (a throwaway server of version 15 or 17, a DSN, or a
  container; optionally PgBouncer in front of it) with the article's data; :mod:`harness.janitor`
  removes everything if the harness is killed;
* :mod:`harness.netproxy` and :mod:`harness.partition` carry the network faults (a proxy per
  worker; nftables drops on the loopback);
* the **supervisor** (:mod:`harness.supervisor`) forks **worker** processes, each running one
  **design** with one **tenant mode**, strikes the schedule's supervisor **faults** at named points,
  restarts the dead, and samples ``pg_stat_activity``;
* the **runner** (:mod:`harness.runner`) turns one **schedule** into one **history**;
* the **search** (:mod:`harness.search`) looks for a schedule that violates a **property** and
  shrinks it; the **report** (:mod:`harness.report`) and the command line (:mod:`harness.cli`)
  show it, designs side by side; :mod:`harness.experiments` reproduces the article's measurements
  and :mod:`harness.bench` prints the benchmark figures.

Nothing is imported here: ``python -m pg_job_chaos.harness.janitor`` must start without the provisioning stack.
"""
