"""A real REST service for the services tests: a FastAPI app with its own generated OpenAPI 3.1 document, which keeps
every request it receives (method, path, query, headers, body bytes) and gives them back at /_received (a route its
document does not describe). Besides JSON it takes a form and text bodies, and answers with text, an image and
bytes; a file upload (multipart) is in its document too.

    python tests/peers/notes_api.py PORT [ISSUER]

With ISSUER, the service is behind a login: every route of its document wants a bearer JWT from that authorization
server (tests/oauth/provider.mjs), for this service (its audience: http://127.0.0.1:PORT) with scope notes:read,
checked against the issuer's JWKS (FastMCP's JWTVerifier, as tests/peers/protected_server.py); without one the
answer is 401 naming its protected-resource metadata (RFC 9728), which it publishes.
"""

from __future__ import annotations

import base64
import sys
from typing import Annotated, Any

import uvicorn
from fastapi import FastAPI, File, Form, Header, HTTPException, Request, Response, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel

PORT = int(sys.argv[1])
ISSUER = sys.argv[2] if len(sys.argv) > 2 else None
BASE = f"http://127.0.0.1:{PORT}"
OPEN = ("/_received", "/openapi.json", "/.well-known/oauth-protected-resource")
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJ"
                         "RU5ErkJggg==")  # a 1×1 PNG

app = FastAPI(title="Notes", version="1.0", servers=[{"url": "/"}])
received: list[dict[str, Any]] = []
notes: dict[int, dict[str, Any]] = {1: {"id": 1, "title": "first", "tags": ["a"]}}
verifier = None
if ISSUER:
    from fastmcp.server.auth.providers.jwt import JWTVerifier

    verifier = JWTVerifier(jwks_uri=f"{ISSUER}/jwks", issuer=ISSUER, audience=BASE, algorithm="RS256",
                           required_scopes=["notes:read"])


@app.middleware("http")
async def keep(request: Request, call_next: Any) -> Response:
    body = await request.body()
    if request.url.path != "/_received":
        received.append({"method": request.method, "path": request.url.path, "query": request.url.query,
                         "headers": dict(request.headers), "body": base64.b64encode(body).decode()})
    if verifier is not None and request.url.path not in OPEN:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or await verifier.verify_token(token) is None:
            challenge = f'Bearer resource_metadata="{BASE}/.well-known/oauth-protected-resource"'
            return JSONResponse({"detail": "a login is needed"}, 401, headers={"WWW-Authenticate": challenge})
    response: Response = await call_next(request)
    return response


@app.get("/.well-known/oauth-protected-resource", include_in_schema=False)
async def protected_resource() -> dict[str, Any]:
    return {"resource": BASE, "authorization_servers": [ISSUER] if ISSUER else [],
            "scopes_supported": ["notes:read"]}


class NewNote(BaseModel):
    title: str
    tags: list[str] = []


@app.get("/notes", operation_id="list_notes", summary="List the notes")
async def list_notes(tag: str | None = None, limit: int = 10) -> dict[str, Any]:
    found = [n for n in notes.values() if tag is None or tag in n["tags"]]
    return {"notes": found[:limit]}


@app.get("/notes/{note_id}", operation_id="get_note", summary="One note")
async def get_note(note_id: int) -> dict[str, Any]:
    if note_id not in notes:
        raise HTTPException(404, f"no note {note_id}")
    return notes[note_id]


@app.post("/notes", operation_id="create_note", summary="Add a note")
async def create_note(note: NewNote, x_trace: str | None = Header(default=None)) -> dict[str, Any]:
    made = {"id": max(notes, default=0) + 1, **note.model_dump()}
    notes[made["id"]] = made
    return made


@app.delete("/notes/{note_id}", operation_id="delete_note", summary="Delete a note", status_code=204)
async def delete_note(note_id: int) -> Response:
    notes.pop(note_id, None)
    return Response(status_code=204)


@app.post("/notes/form", operation_id="create_note_from_form", summary="Add a note from a form")
async def create_note_from_form(title: Annotated[str, Form()], tags: Annotated[list[str], Form()] = []  # noqa: B006
                                ) -> dict[str, Any]:
    return await create_note(NewNote(title=title, tags=tags))


@app.post("/notes/plain", operation_id="create_note_from_text", summary="Add a note from its text",
          openapi_extra={"requestBody": {"required": True, "content": {"text/plain": {"schema": {"type": "string"}}}}})
async def create_note_from_text(request: Request) -> dict[str, Any]:
    return await create_note(NewNote(title=(await request.body()).decode()))


@app.post("/notes/upload", operation_id="upload_note", summary="Add a note from a file")
async def upload_note(file: Annotated[UploadFile, File()]) -> dict[str, Any]:
    return await create_note(NewNote(title=(await file.read()).decode()))


@app.get("/notes/{note_id}/text", operation_id="note_text", summary="One note as text",
         response_class=PlainTextResponse)
async def note_text(note_id: int) -> str:
    return f"{notes[note_id]['title']} ({', '.join(notes[note_id]['tags'])})"


@app.get("/pixel", operation_id="pixel", summary="A picture",
         responses={200: {"content": {"image/png": {}}}}, response_class=Response)
async def pixel() -> Response:
    return Response(PIXEL, media_type="image/png")


@app.get("/notes/{note_id}/export", operation_id="export_note", summary="One note's bytes",
         responses={200: {"content": {"application/octet-stream": {}}}}, response_class=Response)
async def export_note(note_id: int) -> Response:
    return Response(b"\x00\x01" + notes[note_id]["title"].encode(), media_type="application/octet-stream")


@app.get("/_received", include_in_schema=False)
async def what_was_received() -> list[dict[str, Any]]:
    return received


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
