"""Where mcpx keeps its state (SPEC section 2)."""

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path


def state_dir() -> Path:
    if home := os.environ.get("MCPX_HOME"):
        return Path(home).expanduser()
    if xdg := os.environ.get("XDG_STATE_HOME"):
        return Path(xdg).expanduser() / "mcpx"
    return Path.home() / ".local" / "state" / "mcpx"


@dataclass(frozen=True)
class StatePaths:
    root: Path

    @classmethod
    def current(cls) -> "StatePaths":
        return cls(state_dir())

    @property
    def db(self) -> Path:
        return self.root / "mcpx.db"

    @property
    def socket(self) -> Path:
        return self.root / "daemon.sock"

    @property
    def handoff(self) -> Path:
        """Where `mcpx serve` hands its stdin and stdout to the daemon (mcpx/shared/handoff.py)."""
        return self.root / "serve.sock"

    @property
    def daemon_json(self) -> Path:
        return self.root / "daemon.json"

    @property
    def token(self) -> Path:
        return self.root / "token"

    @property
    def log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def daemon_id(self) -> Path:
        """This state directory's daemon, as a shared store's team knows it across restarts."""
        return self.root / "daemon-id"

    @property
    def lock(self) -> Path:
        return self.root / "daemon.lock"

    @property
    def request_state_key(self) -> Path:
        return self.root / "request-state.key"

    @property
    def demo_key(self) -> Path:
        """What the bundled demo server signs its requestState with (mcpx/demo/mcp_server.py), so that a call waiting on
        it is answered after a restart of the daemon and of the demo."""
        return self.root / "demo-request-state.key"

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)


def write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner can read, never briefly world-readable."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def load_key(path: Path) -> bytes:
    """A secret key kept in the state directory (32 random bytes, 0600), made on first use, so what was sealed or
    signed with it before a daemon restart still opens after it. Processes that make it at once all end with the
    one that was made first (each reads back what is there), never each with its own."""
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = None
    if key is not None and len(key) >= 32:
        return key
    made = path.with_name(f".{path.name}.{os.getpid()}.new")
    write_private(made, os.urandom(32))  # what secrets.token_bytes does; `secrets` costs every CLI start 6 ms
    try:
        if key is None:
            with contextlib.suppress(FileExistsError):  # another process made it first: theirs is the key
                os.link(made, path)
        else:
            os.replace(made, path)  # too short to be one of ours: replaced
    finally:
        with contextlib.suppress(FileNotFoundError):
            made.unlink()
    return path.read_bytes()
