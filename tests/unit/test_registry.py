"""The property registry: ``@decides(name, group=..., position=...)`` is the one place a property's
name is written; ``PROPERTIES`` and ``GROUPS`` derive from it (no database)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pg_job_chaos import properties
from pg_job_chaos.properties import GROUPS, PROPERTIES
from pg_job_chaos.properties.core import REGISTRY, Result, decides, held
from tests.unit.test_properties import empty, sane

PACKAGE = Path(properties.__file__).parent


def test_properties_and_groups_keep_their_contents_and_order():
    assert list(PROPERTIES) == [
        "tenant-isolation", "single-commit", "no-overlap", "at-most-once-effects", "attempts-counted",
        "bounded-attempts", "progress", "terminal-states", "bounded-blast-radius", "horizon", "pool-hygiene",
        "no-stale-effect", "done-means-committed", "transient-recovers", "library-one-finish",
        "success-final", "starvation-bound", "tenant-cap", "work-conserving", "acknowledged-enqueue",
        "attempts-monotonic", "failover-recovers", "graceful-completes"]
    assert GROUPS == {
        "safety": ("tenant-isolation", "single-commit", "no-overlap", "at-most-once-effects",
                   "attempts-counted",
                   "bounded-attempts", "no-stale-effect", "done-means-committed", "library-one-finish",
                   "success-final", "acknowledged-enqueue", "attempts-monotonic"),
        "liveness": ("progress", "terminal-states", "bounded-blast-radius", "transient-recovers",
                     "failover-recovers", "graceful-completes"),
        "resources": ("horizon", "pool-hygiene"),
        "fairness": ("starvation-bound", "tenant-cap", "work-conserving"),
    }
    assert list(GROUPS) == ["safety", "liveness", "resources", "fairness"]
    assert properties.gate() == tuple(p for p in PROPERTIES  # opt-in: fairness
                                      if p not in ("starvation-bound", "tenant-cap", "work-conserving"))


def test_every_registered_property_has_one_name_and_one_group():
    assert set(REGISTRY) == set(PROPERTIES)
    for name, prop in REGISTRY.items():
        assert prop.name == name and PROPERTIES[name] is prop.check
        assert [g for g, names in GROUPS.items() if name in names] == [prop.group]
    assert len({id(p.check) for p in REGISTRY.values()}) == len(REGISTRY)  # no check under two names
    assert len({p.position for p in REGISTRY.values()}) == len(REGISTRY)


@pytest.mark.parametrize("name", PROPERTIES)
def test_the_name_on_every_result_is_the_registered_one(name):
    for h in (empty(), sane()):
        result = PROPERTIES[name](h)
        assert isinstance(result, Result) and result.name == name


def test_every_property_module_is_imported_and_writes_its_name_once():
    """Registration happens on import: every ``@decides`` in the package is in the registry (a module
    ``properties/__init__`` forgot to import would be missing), and the module that decides a property
    spells its name once, in the decorator."""
    found = {}
    for path in sorted(PACKAGE.glob("*.py")):
        for name in re.findall(r'^@decides\("([^"]+)"', path.read_text(), flags=re.M):
            found[name] = path
    assert set(found) == set(REGISTRY)
    for name, path in found.items():
        assert path.read_text().count(f'"{name}"') == 1, (name, path.name)


def test_a_duplicate_name_or_position_raises_at_registration():
    before = dict(REGISTRY)
    with pytest.raises(ValueError, match="'no-overlap' is registered twice: "
                                         "by pg_job_chaos.properties.checks.no_overlap"):
        @decides("no-overlap", group="safety", position=99)
        def again(h, name):
            return held(name, "")
    with pytest.raises(ValueError, match="takes position 3 of 'no-overlap'"):
        @decides("a-new-one", group="safety", position=3)
        def elsewhere(h, name):
            return held(name, "")
    with pytest.raises(ValueError, match="needs a name and a group"):
        @decides("a-new-one", group="", position=98)
        def nowhere(h, name):
            return held(name, "")
    assert REGISTRY == before
