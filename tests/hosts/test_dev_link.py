"""`./dev run` leaves `mcpx` callable as `mcpx`: `./dev link` (which it runs) links ~/.local/bin/mcpx to this
checkout's .venv/bin/mcpx — and never replaces an mcpx that is not such a link."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import loud_skip
from harness import PATIENCE, ROOT

VENV_MCPX = ROOT / ".venv" / "bin" / "mcpx"


def link(home: Path, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / "dev"), "link"], env={"HOME": str(home), "PATH": path}, capture_output=True,
                          text=True, timeout=PATIENCE)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    if not VENV_MCPX.exists():
        loud_skip(f"{VENV_MCPX} is missing: the suite runs from ./dev test's venv")
    return tmp_path


def test_a_new_link_and_what_to_add_to_path(home: Path) -> None:
    done = link(home)
    target = home / ".local" / "bin" / "mcpx"
    assert done.returncode == 0 and target.is_symlink() and os.readlink(target) == str(VENV_MCPX)
    assert f"linked {target} -> {VENV_MCPX}" in done.stderr
    assert 'export PATH="$HOME/.local/bin:$PATH"' in done.stderr  # not on this PATH
    version = subprocess.run(["mcpx", "--version"], env={"PATH": f"{target.parent}:/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=PATIENCE)
    assert version.returncode == 0 and version.stdout.startswith("mcpx ")
    again = link(home, f"{target.parent}:/usr/bin:/bin")
    assert again.returncode == 0 and again.stderr == "" and os.readlink(target) == str(VENV_MCPX)


def test_another_checkouts_link_is_moved_here_and_anything_else_is_left(home: Path) -> None:
    target = home / ".local" / "bin" / "mcpx"
    target.parent.mkdir(parents=True)
    target.symlink_to("/elsewhere/checkout/.venv/bin/mcpx")
    moved = link(home)
    assert moved.returncode == 0 and os.readlink(target) == str(VENV_MCPX) and "now runs this checkout" in moved.stderr
    target.unlink()
    target.symlink_to("/home/someone/.local/pipx/venvs/mcpx/bin/mcpx")
    kept = link(home)
    assert kept.returncode == 0 and os.readlink(target) == "/home/someone/.local/pipx/venvs/mcpx/bin/mcpx"
    assert "links elsewhere" in kept.stderr
    target.unlink()
    target.write_text("#!/bin/sh\n")
    left = link(home)
    assert left.returncode == 0 and target.read_text() == "#!/bin/sh\n" and "is not a link; leaving it" in left.stderr
