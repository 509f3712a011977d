"""`mcpx daemon install`: the user service's file, checked by its contents (no service manager is run), and the
daemon started the way the file says, as its manager would."""

from __future__ import annotations

import contextlib
import json
import plistlib
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import loud_skip
from harness import (
    PATIENCE,
    Daemon,
    free_port,
    make_daemon,
    stop_pid,
    stop_process,
    wait_for_sync,
)


@pytest.fixture
def person(home: Path, tmp_path: Path) -> Daemon:
    """The CLI of a person whose home is a fresh directory (where the service file goes)."""
    d = make_daemon(home)
    d.env.update(HOME=str(tmp_path / "person"))
    d.env.pop("XDG_CONFIG_HOME", None)
    return d


def unit_path(d: Daemon) -> Path:
    return Path(d.env["HOME"]) / ".config" / "systemd" / "user" / "mcpx.service"


def unit(d: Daemon) -> dict[str, list[str]]:
    """The unit's keys, each with its values in order (Environment= comes many times)."""
    keys: dict[str, list[str]] = {}
    for line in unit_path(d).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            keys.setdefault(key, []).append(value)
    return keys


def systemd_words(value: str) -> list[str]:
    """ExecStart= and Environment= words as systemd reads them: quoted, with %% and $$ for % and $."""
    return [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(value)]


def test_install_writes_a_systemd_user_unit_that_runs_this_mcpx_and_uninstall_removes_it(person: Daemon) -> None:
    port = free_port()
    done = person.cli("daemon", "install", "--manager", "systemd", "--listen", f"127.0.0.1:{port}")
    assert done.returncode == 0, done.stderr
    path = unit_path(person)
    assert f"wrote {path}" in done.stdout
    assert "systemctl --user daemon-reload" in done.stdout
    assert "systemctl --user enable --now mcpx.service" in done.stdout
    assert "mcpx daemon stop" in done.stdout  # a daemon running now would hold the socket the service wants
    keys = unit(person)
    assert systemd_words(keys["ExecStart"][0]) == [sys.executable, "-m", "mcpx", "daemon", "--listen",
                                                    f"127.0.0.1:{port}"]
    env = dict(systemd_words(v)[0].split("=", 1) for v in keys["Environment"])
    assert env["MCPX_SERVICE"] == "systemd:mcpx.service"
    assert env["MCPX_HOME"] == person.env["MCPX_HOME"] and env["MCPX_CONFIG"] == person.env["MCPX_CONFIG"]
    assert env["PATH"] == person.env["PATH"]
    assert keys["Restart"] == ["on-failure"] and keys["WantedBy"] == ["default.target"]
    assert keys["WorkingDirectory"] == ["%h"]

    again = person.cli("daemon", "install", "--manager", "systemd", "--listen", f"127.0.0.1:{port}")
    assert again.returncode == 0 and "already installed, nothing changed" in again.stdout

    wants = path.parent / "default.target.wants"
    wants.mkdir()
    (wants / "mcpx.service").symlink_to(path)  # as `systemctl --user enable` leaves it
    removed = person.cli("daemon", "install", "--uninstall", "--manager", "systemd", "--json")
    assert removed.returncode == 0, removed.stderr
    doc = json.loads(removed.stdout)
    assert doc["removed"] == [str(path), str(wants / "mcpx.service")]
    assert doc["then"] == ["systemctl --user stop mcpx.service", "systemctl --user daemon-reload"]
    assert not path.exists() and not (wants / "mcpx.service").is_symlink()
    nothing = person.cli("daemon", "install", "--uninstall", "--manager", "systemd")
    assert nothing.returncode == 0 and "nothing changed" in nothing.stdout


def test_install_leaves_a_file_it_did_not_write_alone(person: Daemon) -> None:
    path = unit_path(person)
    path.parent.mkdir(parents=True)
    path.write_text("[Service]\nExecStart=/usr/bin/true\n")
    for args in ((), ("--uninstall",)):
        done = person.cli("daemon", "install", "--manager", "systemd", *args)
        assert done.returncode == 1 and str(path) in done.stderr and "not written by mcpx" in done.stderr
    assert path.read_text() == "[Service]\nExecStart=/usr/bin/true\n"


def test_the_unit_is_one_systemd_accepts(person: Daemon) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        loud_skip("systemd-analyze is not installed (Debian package systemd): the unit's syntax is not checked")
    assert person.cli("daemon", "install", "--manager", "systemd").returncode == 0
    # system mode: a user manager needs a running session; the syntax and the command's path are what is checked
    checked = subprocess.run([analyze, "verify", str(unit_path(person))], capture_output=True, text=True,
                             timeout=PATIENCE)
    assert checked.returncode == 0 and "Invalid" not in checked.stderr and "Unknown" not in checked.stderr, \
        checked.stderr


def test_install_writes_a_launchd_agent(person: Daemon) -> None:
    done = person.cli("daemon", "install", "--manager", "launchd")
    assert done.returncode == 0, done.stderr
    path = Path(person.env["HOME"]) / "Library" / "LaunchAgents" / "io.mcpx.daemon.plist"
    assert f"wrote {path}" in done.stdout and "launchctl bootstrap gui/" in done.stdout and str(path) in done.stdout
    agent = plistlib.loads(path.read_bytes())
    assert agent["Label"] == "io.mcpx.daemon"
    assert agent["ProgramArguments"] == [sys.executable, "-m", "mcpx", "daemon"]
    assert agent["EnvironmentVariables"]["MCPX_SERVICE"] == "launchd:io.mcpx.daemon"
    assert agent["EnvironmentVariables"]["MCPX_HOME"] == person.env["MCPX_HOME"]
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["StandardErrorPath"] == str(Path(person.env["MCPX_HOME"]) / "daemon.out")
    removed = person.cli("daemon", "install", "--uninstall", "--manager", "launchd")
    assert removed.returncode == 0 and "launchctl bootout gui/" in removed.stdout and not path.exists()


def test_a_daemon_run_as_the_unit_says_is_a_service_restarted_only_by_its_manager(person: Daemon) -> None:
    assert person.cli("daemon", "install", "--manager", "systemd").returncode == 0
    keys = unit(person)
    env = {**person.env, **dict(systemd_words(v)[0].split("=", 1) for v in keys["Environment"])}
    proc = subprocess.Popen(systemd_words(keys["ExecStart"][0]), env=env, cwd=person.env["HOME"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_sync(lambda: person.cli("status").returncode == 0, what="the service's daemon serving")
        assert "started   as a user service (systemd:mcpx.service)" in person.cli("status").stdout
        restart = person.cli("daemon", "restart")
        assert restart.returncode == 1 and "systemctl --user restart mcpx.service" in restart.stderr
        stopped = person.cli("daemon", "stop")
        assert stopped.returncode == 0 and "runs as a user service (systemd:mcpx.service)" in stopped.stdout
        assert proc.wait(PATIENCE) == 0  # SIGTERM: drained, a clean exit (systemd does not restart it)
    finally:
        stop_process(proc)
        with contextlib.suppress(OSError, ValueError, KeyError):
            stop_pid(int(json.loads((Path(person.env["MCPX_HOME"]) / "daemon.json").read_text())["pid"]))
