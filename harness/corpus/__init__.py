"""The real-bug corpus (issue 48): cases users reported, each searched at the version that had the bug and
at the version that fixed it. :mod:`.case` the file format, :mod:`.systems` and :mod:`.envs` the versions
installed beside the pinned one, :mod:`.hunt` one side's search, :mod:`.command` ``run.py corpus``."""

from .case import Case, load, load_dir
from .command import CORPUS, Outcome, run_case

__all__ = ["CORPUS", "Case", "Outcome", "load", "load_dir", "run_case"]
