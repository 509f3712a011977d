"""The /v1 API: one route table (handlers and openapi.json), the bodies' shapes, who is asking, and the
routes of the broker, the gateway and the inbox's addresses. The daemon installs it; the plugin's
TypeScript contract is generated from its openapi.json (daemon/typescript.py)."""
