"""mcpx: an MCP gateway whose questions are durable state with a deadline.

For scripts: `mcpx.Client` (async) and `mcpx.connect()` (blocking), docs/scripts.md."""

from typing import TYPE_CHECKING

__version__ = "0.1.0"

__all__ = ["Accept", "AnswerRefused", "BlockingClient", "CallFailed", "Cancel", "Client", "Decline", "EndedMeanwhile",
           "Question", "Reply", "__version__", "connect"]

if TYPE_CHECKING:
    from mcpx.client.script import (
        Accept,
        AnswerRefused,
        BlockingClient,
        CallFailed,
        Cancel,
        Client,
        Decline,
        EndedMeanwhile,
        Question,
        Reply,
        connect,
    )
else:
    def __getattr__(name: str) -> object:
        """The script client's names, imported when a script first asks for one: every other use of the package
        (`mcpx serve`, which a host starts often; the daemon) does without its imports."""
        if name in __all__:
            from mcpx.client import script

            return getattr(script, name)
        raise AttributeError(f"module 'mcpx' has no attribute {name!r}")
