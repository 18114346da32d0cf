#!/usr/bin/env bash
# The same job for any CI system: exit 0 all held, 1 a gated property violated (or, with --strict,
# could not decide), 2 usage error, 3 the harness failed. Keep chaos-out/ as the job's artifact and
# ~/.cache/pg-job-chaos (Hypothesis's example database) in the CI system's cache between runs.
# The commands are the CI guide's (docs/guides/ci.md): lease-outbox keeps every safety property under
# crash,overrun (exit 0); the same search on lease exits 1, naming the safety properties it loses.
# Replace "--design lease-outbox" with your own design (package.module:attr or path/to/file.py:attr),
# the faults with the ones it must survive, and "--fail-on safety" with what your design promises.
# There is no PyPI release: build a wheel in a pg-job-chaos checkout (pip wheel --no-deps . -w dist) and
# keep it under vendor/. With --strict, a property not judged for your design (library-one-finish
# without accepted_finishes: docs/guides/own-worker.md) does not fail the job.
set -euo pipefail
pip install vendor/pg_job_chaos-*.whl
pg-job-chaos search --design lease-outbox --faults crash,overrun --examples 10 --fail-on safety --strict --junit chaos-out/junit.xml --json chaos-out/result.json --html chaos-out/report.html
