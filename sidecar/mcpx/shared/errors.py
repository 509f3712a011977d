"""The root of mcpx's own exceptions: `except McpxError` catches whatever mcpx raised on purpose, and nothing
Python or a library raised. Each family stays where its layer is; this module imports nothing, so every layer
(the wire included) may derive from it.

    McpxError
     ├── BrokerError              broker/refusals.py: an answer refused, each with its HTTP status
     │    └── InvalidId · NotFound · AlreadyAnswered · Gone · InvalidContent · Forbidden · StoreUnavailable ·
     │        InvalidQuestion
     ├── QuestionEnded            broker/refusals.py: told to an asker whose question ended unanswered
     ├── StoreRefused             broker/store.py: the configured store cannot be used at all
     ├── Busy                     broker/sqlite.py: the database is locked by another process
     ├── ConfigError              config/problems.py: a config that does not hold, naming file and field
     ├── RpcError                 mcp/jsonrpc.py: a JSON-RPC error to answer with, or answered with
     │    └── UnattributedRequest              upstream/attribution.py
     ├── FrameError               mcp/jsonrpc.py: a frame that is not JSON-RPC
     ├── PeerClosed               mcp/peer.py: the other side went away
     ├── StartError               mcp/stdio.py: an upstream that could not start
     ├── RoundsError              mcp/input_required.py: a modern call's rounds that cannot go on
     │    └── TooManyRounds
     ├── UpstreamError            shared/upstream_errors.py: something about an upstream the caller should read
     │    ├── NeedsLegacy         upstream/connection.py
     │    ├── UnknownServer       shared/upstream_errors.py
     │    │    └── UnknownTool
     │    └── MissingSecrets      upstream/secrets.py: a server's secret not in the keychain, or no keychain
     ├── NoKeychain, KeychainError  system/keychain.py: no OS keychain answers here; or it answered with a refusal
     ├── CallError                call/failures.py: a call that ended without a result
     ├── CallTimeout              call/deadline.py
     ├── UnknownTask              call/failures.py
     ├── Refused                  surface/http_endpoint.py: a /mcp request answered before the surface
     ├── RouteError               api/table.py: a /v1 route's refusal
     ├── DaemonError              daemon/server.py
     ├── LaunchError              daemon/launch.py
     ├── HomeTaken                daemon/homelock.py: another daemon holds the state directory
     ├── ServiceError             daemon/service.py
     ├── SendFailed               inbox/notify.py: a notification not delivered
     ├── HandoffError             shared/handoff.py
     ├── ProcessUnseen            system/agentshell.py
     └── the CLI's and the client library's: NoDaemon, ApiError (client/transport.py), Refused (cli/serve_handoff.py),
         Declined (client/prompt.py), EndedMeanwhile (client/question_watch.py),
         Unimportable (cli/hosts/server_import.py), HostConfigError (cli/hosts/host_files.py)
          └── OpencodeError (cli/hosts/opencode_files.py)

The ValueError subclasses (JsonRefused, SchemaProblem, EntriesProblem, RepliesProblem) stay ValueErrors: they are
a value's problem, caught where the value is parsed.
"""

from __future__ import annotations


class McpxError(Exception):
    """Something mcpx raised on purpose; the message says what was wrong and, where it can, what to do next."""
