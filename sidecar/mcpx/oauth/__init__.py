"""MCP authorization, the client side (OAuth 2.1): mcpx logs in to an HTTP server for the person.

discovery.py finds who issues tokens for a server (RFC 9728, RFC 8414, OpenID discovery); flow.py registers a
client (RFC 7591), builds the login link (PKCE S256, state, RFC 8707 resource), takes the code back (RFC 9207 iss),
refreshes and revokes; vault.py keeps tokens and clients in the OS keychain; logins.py is the daemon's side: one
login per server, its question for the person, and the wire's Authorizer (mcp/http_client.py).
"""
