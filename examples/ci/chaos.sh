#!/usr/bin/env bash
# The same job for any CI system: exit 0 all held, 1 a property violated (or, with --strict, could
# not decide), 2 usage error, 3 the harness failed. Keep chaos-out/ as the job's artifact and
# ~/.cache/pg-job-chaos (Hypothesis's example database) in the CI system's cache between runs.
# The commands are the README's ("In CI").
set -euo pipefail
pip install pg-job-chaos
pg-job-chaos search --design lease --faults crash,overrun --examples 10 --strict --junit chaos-out/junit.xml --json chaos-out/result.json --html chaos-out/report.html
