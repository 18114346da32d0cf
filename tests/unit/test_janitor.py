"""The janitor's registrations from a forked process (a slot) and from its parent stay apart.

A slot keeps the parent's ``Janitor`` object, its counter and its pipe: keys of the counter alone were
made twice, and the slot's ``forget`` of its own run directory dropped the parent's registration of the
slot's run directories -- a harness killed then left an empty ``slot-<pid>-2-*`` behind (one a CI run).
"""

from __future__ import annotations

import os

from pg_job_chaos.harness.janitor import Janitor


def test_a_forked_processs_forget_leaves_its_parents_registration(tmp_path):
    j = Janitor()
    try:
        j.register("rmtree", path=str(tmp_path / "first"))
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the slot: its next key is the one its parent makes next
            try:
                os.read(go_r, 1)
                key = j.register("rmtree", path=str(tmp_path / "the-slots-run"))
                j.forget(key)
            finally:
                os._exit(0)
        theirs = tmp_path / "the-parents"
        theirs.mkdir()
        j.register("rmtree", path=str(theirs))
        os.write(go_w, b"x")
        os.waitpid(pid, 0)
    finally:
        j._stdin.close()  # the harness dies: EOF without "done", the janitor removes what is registered
        j._proc.wait(30)
    assert not theirs.exists()
