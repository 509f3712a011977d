"""Is a daemon answering on a unix socket? Kept apart so light commands need not import the daemon."""

import socket
from pathlib import Path


def socket_alive(path: Path, timeout: float = 1.0) -> bool:
    """Is a daemon answering on this socket (as opposed to a stale file left by a kill -9)?"""
    if not path.exists():
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()
