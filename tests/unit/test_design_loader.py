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


def test_the_loader_sets_where_a_design_came_from_and_the_harness_reads_that_not_its_name(tmp_path):
    from pg_job_chaos.harness.supervisor.standby import eligible
    from pg_job_chaos.workers import DesignHandle, Origin
    from pg_job_chaos.workers.builtin.lease import Lease

    assert load_design("lease").origin is Origin.BUILTIN and eligible(load_design("lease"))
    for spec in ("procrastinate", "pg_job_chaos.adapters.procrastinate:Procrastinate"):
        library = load_design(spec)
        assert library.origin is Origin.LIBRARY and library.origin.ours and not eligible(library)
    # a user's code, though it is a built-in class by module:attr or named as one: a plug-in's, never
    # forked ahead nor taken for the harness's own
    (tmp_path / "mine.py").write_text("from pg_job_chaos.workers.builtin.lease import Lease\n\n\n"
                                      "class Mine(Lease):\n    name = 'lease'\n")
    for handle in (load_design("pg_job_chaos.workers.builtin.lease:Lease"), DesignHandle.of(Lease()),
                   load_design(f"{tmp_path / 'mine.py'}:Mine")):
        assert handle.name == "lease" and handle.origin is Origin.PLUGIN
        assert not handle.origin.ours and not eligible(handle)
