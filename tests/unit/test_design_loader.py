"""``--design path/to/file.py:Class``: the file imports its neighbours and, run from the project's root,
that root's packages too (as the module form ``package.module:Class`` does)."""

from __future__ import annotations

import sys

from pg_job_chaos.workers import load_design

DESIGN = '''
from pg_job_chaos.workers.hosted import HostedDesign
from pkg.helper import NAME


class Mine(HostedDesign):
    name = NAME

    def install(self, conn, *, worker_role):
        pass
'''


def test_a_design_file_imports_a_package_from_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "helper.py").write_text("NAME = 'from-the-root'\n")
    (tmp_path / "designs").mkdir()
    (tmp_path / "designs" / "d.py").write_text(DESIGN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored afterwards, with what the loader added
    before = set(sys.modules)
    try:
        design = load_design("designs/d.py:Mine")
        assert design.name == "from-the-root"
        assert sys.path.index(str(tmp_path / "designs")) < sys.path.index(str(tmp_path))
    finally:
        for name in set(sys.modules) - before:
            if name == "pkg" or name.startswith(("pkg.", "pgjc_design_d_")):
                del sys.modules[name]
