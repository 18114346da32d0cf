#!/usr/bin/env python3
"""pg-job-chaos: ``python run.py --design lease --faults crash,overrun`` (see README.md)."""

import sys

from pg_job_chaos.harness.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
