"""The harness's own statements name its schema (pgjc) for every table of its: a bare name could reach a
user's table of that name (``public.jobs``) first. Only a design's own SQL may name the article's queue
bare, as the article does (docs/internals.md, "The harness's tables: schema pgjc")."""

from __future__ import annotations

import re

from pg_job_chaos.harness.postgres import dataset as db
from tests.conftest import ROOT

# The word after a keyword that names a table (reads, writes, empties, alters or makes it): a qualified
# name gives its schema (pgjc), a bare one the table.
_BARE = re.compile(r"\b(?:from|into|update|join|truncate|table|exists|on|analyze|vacuum \(verbose\))\s+"
                   r"(\w+)\b", re.IGNORECASE)
OURS = (*db.OURS, "exp_horizon_jobs", "exp_vacuum_jobs")
# The built-in designs' own SQL and the planted designs': they say jobs, as the article does.
DESIGNS = {"workers/builtin/lease.sql", "workers/builtin/one_transaction.sql", "workers/builtin/queue.sql",
           "workers/builtin/fair.sql", "harness/bench/planted.sql"}
ALLOWED = {("workers/builtin/outbox.sql", "jobs")}  # lease-outbox's pending counts its queue, bare


def _statements(path):
    """The file's text without its comments (SQL's ``--``, JavaScript's ``//`` and ``/* ... */``)."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.DOTALL)
    return "\n".join(re.split(r"--|//", line, maxsplit=1)[0] for line in text.splitlines())


def test_every_statement_of_the_harness_names_its_schema():
    files = [p for p in ROOT.glob("**/*.sql") if "node_modules" not in p.parts and ".venv" not in p.parts]
    files += [ROOT / "adapters" / "node" / "graphile-worker.js"]
    bare = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel in DESIGNS or rel.startswith(("examples/", "tests/")):
            continue
        bare += [f"{rel}: {name}" for name in _BARE.findall(_statements(path))
                 if name in OURS and (rel, name) not in ALLOWED]
    assert not bare, bare
    assert len(files) > 20  # the walk found the tree's SQL


def test_the_check_would_see_a_bare_name():
    found = _BARE.findall("insert into job_runs (job_id) values (1); select 1 from pgjc.invoices")
    assert [n for n in found if n in OURS] == ["job_runs"]
