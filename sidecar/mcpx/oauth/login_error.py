"""The login's one error: a step of it that could not be done, in words that name the server and the step."""

from mcpx.shared.errors import McpxError


class LoginError(McpxError):
    """Discovery, registration, the code's exchange or a refresh failed; or the authorization server refused."""
