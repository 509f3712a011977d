"""The OS keychain, where a server's `secrets` are kept: the Secret Service on Linux, the Keychain on macOS.

Through the `keyring` library, but never its choice of backend: keyring falls back to whatever it finds
(a plaintext or encrypted file from keyrings.alt, the "fail" or "null" backends, a chainer of them), and a
secret must never land silently in a file. So the backend is the platform's own, named here; where it cannot
be reached (a headless box with no Secret Service on its D-Bus session bus) every use raises `NoKeychain`,
saying what is missing and how to give the value instead (the server's `env`, `${NAME}`).

An entry is service `mcpx:SERVER`, username `NAME`: `secret-tool lookup service mcpx:github username
GITHUB_TOKEN` finds it. Every function here blocks (a D-Bus round trip, or a prompt to unlock the
keychain): the daemon calls them off its loop.
"""

from __future__ import annotations

import sys
from typing import Any

from mcpx.shared.errors import McpxError

SERVICE = "mcpx:"  # + the server's name


class NoKeychain(McpxError):
    """No keychain can be reached here: nothing is stored, and nothing is read."""


class KeychainError(McpxError):
    """The keychain was reached but refused (locked, a prompt dismissed, an error of its own)."""


def where() -> str:
    """The keychain mcpx uses on this platform, in words."""
    if sys.platform == "darwin":
        return "the macOS Keychain"
    if sys.platform.startswith("win"):
        return "the Windows Credential Locker"
    return ("a Secret Service on the D-Bus session bus (gnome-keyring or KeePassXC, with DBUS_SESSION_BUS_ADDRESS "
            "set where mcpx runs)")


def _backend() -> Any:
    """The platform's own keychain backend, reachable now; else NoKeychain."""
    try:
        if sys.platform == "darwin":
            from keyring.backends import macOS

            backend: Any = macOS.Keyring()
        elif sys.platform.startswith("win"):
            from keyring.backends import Windows

            backend = Windows.WinVaultKeyring()
        else:
            from keyring.backends import SecretService

            backend = SecretService.Keyring()  # type: ignore[no-untyped-call]
        backend.priority  # noqa: B018 -- keyring's own probe: raises when the backend cannot be used here
    except Exception as exc:  # an ImportError, keyring's RuntimeError: each means the same to the person
        raise NoKeychain(f"no keychain: mcpx keeps secrets only in {where()}, and none answers here ({exc})") from None
    return backend


def _keyring_call(action: str, fn: Any, *args: str) -> Any:
    backend = _backend()
    try:
        return getattr(backend, fn)(*args)
    except Exception as exc:  # keyring's and secretstorage's errors alike; the value is never in their words
        from keyring.errors import PasswordDeleteError

        if isinstance(exc, PasswordDeleteError):
            return False
        raise KeychainError(f"the keychain refused to {action}: {type(exc).__name__}: {exc}") from None


def read(service: str, name: str) -> str | None:
    """The value kept as `service`, `name` (a server's secret, or mcpx's own: oauth/vault.py's tokens)."""
    value = _keyring_call(f"read {name} of {service}", "get_password", service, name)
    return value if isinstance(value, str) and value else None


def write(service: str, name: str, value: str) -> None:
    if not value:
        raise KeychainError(f"an empty value for {name} of {service} is not kept")
    _keyring_call(f"keep {name} of {service}", "set_password", service, name, value)


def delete(service: str, name: str) -> bool:
    """Whether there was a value to forget."""
    if read(service, name) is None:
        return False
    _keyring_call(f"forget {name} of {service}", "delete_password", service, name)
    return True


def get(server: str, name: str) -> str | None:
    return read(SERVICE + server, name)


def put(server: str, name: str, value: str) -> None:
    write(SERVICE + server, name, value)


def forget(server: str, name: str) -> bool:
    """Whether there was a value to forget."""
    return delete(SERVICE + server, name)


def missing(server: str, names: list[str]) -> list[str]:
    """Which of `names` the keychain has no value for (NoKeychain when there is no keychain to ask)."""
    return [name for name in names if get(server, name) is None]


def values(server: str, names: list[str]) -> dict[str, str]:
    """The values the keychain has for `names` (those it lacks are left out)."""
    out = {}
    for name in names:
        value = get(server, name)
        if value is not None:
            out[name] = value
    return out


def instead(server: str, names: list[str]) -> str:
    """How to give a server its secrets without a keychain: the words every NoKeychain error ends with."""
    env = ", ".join(f'"{n}": "${{{n}}}"' for n in names)
    return (f"to run server {server!r} here without a keychain, take {', '.join(names)} out of its \"secrets\", "
            f"give it \"env\": {{{env}}} and set {'it' if len(names) == 1 else 'them'} in the environment the "
            "daemon starts in")
