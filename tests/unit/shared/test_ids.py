"""Ids (shared/ids.py): a forked child mints its own, never its parent's (the suite's daemons are forks of a process
that imported mcpx, and two daemons forked after it had drawn a helping would have minted the same question ids)."""

from __future__ import annotations

import os

from mcpx.shared.ids import is_id, new_id


def test_a_forked_child_mints_ids_of_its_own() -> None:
    mine = new_id("elc")  # this process has a helping of entropy now
    assert is_id(mine, "elc")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, to the parent, and out without pytest's teardown
        try:
            os.write(write, new_id("elc").encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        theirs = os.read(read, 100).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    ours = new_id("elc")
    assert is_id(theirs, "elc") and theirs != ours, (theirs, ours)
