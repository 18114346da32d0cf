"""``python -m pg_job_chaos ARGS``: the same command line as the console script ``pg-job-chaos``."""

import sys

from .harness.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
