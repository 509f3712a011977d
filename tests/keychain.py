"""A real Secret Service for a test: gnome-keyring-daemon on a private D-Bus session bus, with an unlocked "login"
collection that keyring (mcpx/system/keychain.py) takes as the default one.

`private_keychain(tmp)` starts `dbus-daemon --session` (its address read from its own output), then
`gnome-keyring-daemon --foreground --unlock --components=secrets` on that bus, fed a known password on stdin
(which creates and unlocks the login keyring under tmp's XDG_DATA_HOME), and waits until the service answers.
Its `env` is what a process needs to reach it (give it to the daemon under test and to the CLI). Both processes
are stopped in a finally. A part missing here is a loud skip (a failure under CI).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from jeepney import DBusAddress, new_method_call  # keyring's own D-Bus library on Linux
from jeepney.io.blocking import open_dbus_connection

from conftest import loud_skip
from harness import PATIENCE, stop_process, wait_for_sync

PASSWORD = b"mcpx-test-keyring"
# Debian's session.conf without its service directories: no service is activated, the bus only carries ours
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""
PARTS = {"dbus-daemon": "dbus-daemon (Debian: dbus-daemon)", "gnome-keyring-daemon": "gnome-keyring",
         "secret-tool": "secret-tool (Debian: libsecret-tools)"}


@dataclass
class Keychain:
    env: dict[str, str]  # DBUS_SESSION_BUS_ADDRESS and where the keyring keeps its files

    def lookup(self, server: str, name: str) -> str | None:
        """What the Secret Service holds for a server's secret, asked with secret-tool (not through mcpx)."""
        out = subprocess.run(["secret-tool", "lookup", "service", f"mcpx:{server}", "username", name],
                             env={**os.environ, **self.env}, capture_output=True, text=True, timeout=PATIENCE)
        return out.stdout if out.returncode == 0 and out.stdout else None

    def store(self, server: str, name: str, value: str) -> None:
        subprocess.run(["secret-tool", "store", "--label", f"mcpx {server} {name}", "service", f"mcpx:{server}",
                        "username", name], env={**os.environ, **self.env}, input=value, text=True, check=True,
                       timeout=PATIENCE)


def _ready(env: dict[str, str]) -> bool:
    """The Secret Service answers on the bus and its default collection is the unlocked login keyring. A lookup
    answers (exit 1 is "no such item") before the keyring fed on stdin is made under load: a store then asks to
    create a collection, a prompt nobody can answer ("Prompt dismissed"), so the alias is waited for too."""
    out = subprocess.run(["secret-tool", "lookup", "service", "mcpx:probe", "username", "probe"],
                         env={**os.environ, **env}, capture_output=True, timeout=PATIENCE)
    return out.returncode in (0, 1) and not out.stderr and _default_collection(env["DBUS_SESSION_BUS_ADDRESS"])


def _default_collection(address: str) -> bool:
    """The Secret Service's `default` alias names a collection (ReadAlias answers "/" while there is none), and that
    collection is unlocked: under load it is made before the password fed on stdin unlocks it, and a store meanwhile
    is refused ("Cannot create an item in a locked collection")."""
    service = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                          interface="org.freedesktop.Secret.Service")
    with open_dbus_connection(bus=address) as conn:
        reply = conn.send_and_get_reply(new_method_call(service, "ReadAlias", "s", ("default",)), timeout=PATIENCE)
        if not reply.body or reply.body[0] == "/":
            return False
        collection = DBusAddress(reply.body[0], bus_name="org.freedesktop.secrets",
                                 interface="org.freedesktop.DBus.Properties")
        locked = conn.send_and_get_reply(new_method_call(collection, "Get", "ss", (
            "org.freedesktop.Secret.Collection", "Locked")), timeout=PATIENCE)
    return bool(locked.body) and locked.body[0][1] is False


@contextlib.contextmanager
def private_keychain(tmp: Path) -> Iterator[Keychain]:
    for part, package in PARTS.items():
        if shutil.which(part) is None:
            loud_skip(f"no {part} here: install {package} for a real Secret Service (./dev test installs it)")
    data, runtime = tmp / "keyring-data", tmp / "keyring-run"
    data.mkdir(parents=True)
    runtime.mkdir(mode=0o700, parents=True)
    base = {"HOME": str(tmp), "XDG_DATA_HOME": str(data), "XDG_RUNTIME_DIR": str(runtime)}
    # a session bus that starts nothing itself: Debian's session.conf would activate a gnome-keyring-daemon of its own
    # (no password, so a locked login keyring: "Cannot create an item in a locked collection") for a request that
    # comes before ours has taken the name, as the readiness probe below does on a loaded machine
    config = tmp / "session-bus.conf"
    config.write_text(BUS_CONFIG)
    bus = subprocess.Popen(["dbus-daemon", f"--config-file={config}", "--nofork", "--nopidfile", "--print-address=1"],
                           env={**os.environ, **base}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    keyring: subprocess.Popen[bytes] | None = None
    try:
        assert bus.stdout is not None
        address = bus.stdout.readline().strip()  # it prints its address once it listens
        if not address:
            raise AssertionError(f"dbus-daemon printed no address (exit {bus.poll()})")
        env = {**base, "DBUS_SESSION_BUS_ADDRESS": address}
        keyring = subprocess.Popen(["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
                                   env={**os.environ, **env}, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        assert keyring.stdin is not None
        keyring.stdin.write(PASSWORD)  # the login keyring's password: it is created with it, and unlocked
        keyring.stdin.close()
        wait_for_sync(lambda: _ready(env), PATIENCE, 0.05)
        yield Keychain(env)
    finally:
        if keyring is not None:
            stop_process(keyring)
        stop_process(bus)
