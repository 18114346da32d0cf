"""The modules that moved when ``workers/`` was laid out by concept, still importable by their old
names for a while, with a :class:`DeprecationWarning` naming the new one.

``--design pg_job_chaos.workers.lease:LeaseFenced`` and ``from pg_job_chaos.workers.base import
QueueDesign`` were public enough to be written down (a saved schedule records the ``--design`` a user
gave). An old name imports the *same* module object as the new one (never a second copy of it:
``tests/unit/test_double_import.py``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

# old module (under the workers package) -> where it lives now
MOVED = {
    "base": "builtin.base", "lease": "builtin.lease", "one_transaction": "builtin.one_transaction",
    "heartbeat": "builtin.heartbeat", "outbox": "builtin.outbox", "fair": "builtin.fair",
    "statements": "body.statements", "context": "body.context", "tenant_track": "tenant.track",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``<package>.<old>`` for each old name of :data:`MOVED` and hands out the new module."""

    def __init__(self, package: str):
        self.package = package

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        head, _, old = fullname.rpartition(".")
        if head != self.package or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder, replaced in sys.modules by exec_module

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__.rpartition(".")[2]
        new = f"{self.package}.{MOVED[old]}"
        warnings.warn(f"{module.__name__} moved to {new}; the old name goes in a later release",
                      DeprecationWarning, stacklevel=2)
        # The import system returns what sys.modules holds once exec_module is done: the real module,
        # so the old name and the new are one object (its __spec__ and __name__ untouched).
        sys.modules[module.__name__] = importlib.import_module(new)


def install(package: str) -> None:
    """Make the old names under *package* importable (once; a second call does nothing)."""
    if not any(isinstance(f, _Alias) and f.package == package for f in sys.meta_path):
        sys.meta_path.append(_Alias(package))
