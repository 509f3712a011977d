"""mcpx: an MCP gateway whose questions are durable state with a deadline.

For scripts: `mcpx.Client` (async) and `mcpx.connect()` (blocking), docs/scripts.md."""

__version__ = "0.1.0"

# after the version, which modules the client imports read
from mcpx.cli.script import (
    Accept,
    AnswerRefused,
    BlockingClient,
    CallFailed,
    Cancel,
    Client,
    Decline,
    Question,
    Reply,
    connect,
)

__all__ = ["Accept", "AnswerRefused", "BlockingClient", "CallFailed", "Cancel", "Client", "Decline", "Question",
           "Reply", "__version__", "connect"]
