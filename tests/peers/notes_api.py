"""A real REST service for the services tests: a FastAPI app with its own generated OpenAPI 3.1 document, which keeps
every request it receives (method, path, query, headers, body bytes) and gives them back at /_received (a route its
document does not describe).

    python tests/peers/notes_api.py PORT
"""

from __future__ import annotations

import base64
import sys
from typing import Any

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Request, Response
from pydantic import BaseModel

app = FastAPI(title="Notes", version="1.0", servers=[{"url": "/"}])
received: list[dict[str, Any]] = []
notes: dict[int, dict[str, Any]] = {1: {"id": 1, "title": "first", "tags": ["a"]}}


@app.middleware("http")
async def keep(request: Request, call_next: Any) -> Response:
    body = await request.body()
    if request.url.path != "/_received":
        received.append({"method": request.method, "path": request.url.path, "query": request.url.query,
                         "headers": dict(request.headers), "body": base64.b64encode(body).decode()})
    response: Response = await call_next(request)
    return response


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


@app.get("/_received", include_in_schema=False)
async def what_was_received() -> list[dict[str, Any]]:
    return received


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
