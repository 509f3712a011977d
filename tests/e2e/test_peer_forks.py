"""The test peers' fork server (tests/forks.py, tests/peers/fork_server.py and fork_client.py): what a daemon
starts, the stand-in, behaves as the peer would have — its environment, cwd, argv, stdin/stdout/stderr and exit
reach and come from the forked script — and no peer outlives its stand-in, however that one ends. A fork server
that is not there is a loud error at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from forks import fork_server
from harness import PATIENCE, PEERS, stop_process, wait_gone

# a peer that says who and where it is, echoes a line, then waits on stdin (as a stdio server does)
WHO = """import json, os, signal, sys
signal.signal(signal.SIGUSR1, lambda *_: os._exit(42))  # as sdk_server.py's die_while_asking does (with 3)
print(json.dumps({"pid": os.getpid(), "argv": sys.argv[1:], "cwd": os.getcwd(), "x": os.environ.get("X"),
                  "path0": sys.path[0], "main": __name__}), flush=True)
print("said on stderr", file=sys.stderr, flush=True)
print("echo " + sys.stdin.readline().strip(), flush=True)
sys.stdin.read()
sys.exit(int(sys.argv[1]))
"""


def start(script: Path, *args: str, cwd: Path) -> subprocess.Popen[str]:
    command, argv = fork_server().command(script, args)
    # its own session, as the daemon starts a server: the daemon signals its group
    return subprocess.Popen([command, *argv], env={"X": "from the daemon"}, cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_a_forked_peer_is_its_script_with_the_callers_world_and_ends_with_its_stand_in(tmp_path: Path) -> None:
    script = tmp_path / "who.py"
    script.write_text(WHO)
    peer = start(script, "7", "--flag", cwd=tmp_path)
    try:
        assert peer.stdout is not None and peer.stdin is not None and peer.stderr is not None
        said = json.loads(peer.stdout.readline())
        assert said["pid"] != peer.pid and said["argv"] == ["7", "--flag"] and said["cwd"] == str(tmp_path)
        assert said["x"] == "from the daemon" and said["path0"] == str(tmp_path) and said["main"] == "__main__"
        assert Path(f"/proc/{said['pid']}/comm").read_text() == "who.py\n"  # named as its script, in ps and acct
        peer.stdin.write("hello\n")
        peer.stdin.flush()
        assert peer.stdout.readline() == "echo hello\n"
        peer.stdin.close()  # its stdin ends: it exits 7, and so does its stand-in
        assert peer.wait(PATIENCE) == 7 and "said on stderr" in peer.stderr.read()
    finally:
        stop_process(peer)

    # forwarded (the peer's default: it dies of it), forwarded (the peer's handler: its exit code), the stand-in gone
    for ending, code in ((signal.SIGTERM, -signal.SIGTERM), (signal.SIGUSR1, 42), (signal.SIGKILL, -signal.SIGKILL)):
        peer = start(script, "0", cwd=tmp_path)
        try:
            assert peer.stdout is not None
            pid = json.loads(peer.stdout.readline())["pid"]
            os.killpg(peer.pid, ending)  # as the daemon stops a server: its process group
            assert peer.wait(PATIENCE) == code
            assert wait_gone(pid, PATIENCE), f"the peer outlived its stand-in's {ending.name}"
        finally:
            stop_process(peer)

    # a stand-in's going and its peer's end reach the server in one wake-up (a daemon killing a server's group as
    # it ends anyway): held still (SIGSTOP) until both are there, the server takes both and serves the next
    server = fork_server().proc.pid
    peer = start(script, "0", cwd=tmp_path)
    try:
        assert peer.stdout is not None and peer.stdin is not None
        pid = json.loads(peer.stdout.readline())["pid"]
        os.kill(server, signal.SIGSTOP)
        try:
            os.killpg(peer.pid, signal.SIGKILL)  # its connection closes
            assert peer.wait(PATIENCE) == -signal.SIGKILL
            peer.stdin.close()  # and the peer ends on its own (our pipe is its stdin), before the server looks
            assert wait_gone(pid, PATIENCE)
        finally:
            os.kill(server, signal.SIGCONT)
    finally:
        stop_process(peer)
    peer = start(script, "0", cwd=tmp_path)
    try:
        assert peer.stdout is not None and json.loads(peer.stdout.readline())["pid"]
    finally:
        stop_process(peer)

    # a peer that fails to start says so on its stderr, with its code (the SDK peers' own failure)
    command, argv = fork_server().command(PEERS / "env_server.py", ("--fail",))
    failed = subprocess.run([command, *argv], env={}, capture_output=True, text=True, timeout=PATIENCE)
    assert failed.returncode == 3 and "refusing to start with --fail" in failed.stderr, failed


def test_a_fork_server_that_is_not_there_is_an_error_at_once(tmp_path: Path) -> None:
    command, argv = fork_server().command(PEERS / "sdk_server.py", ())
    argv[3] = str(tmp_path / "absent.sock")  # the client's socket argument
    gone = subprocess.run([command, *argv], capture_output=True, text=True, timeout=PATIENCE, stdin=subprocess.DEVNULL)
    assert gone.returncode == 70 and "fork server at" in gone.stderr and "is not running" in gone.stderr, gone
