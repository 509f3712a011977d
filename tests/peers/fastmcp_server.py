"""An upstream written with FastMCP that asks with ctx.elicit (legacy back-channel)."""

import json
from dataclasses import dataclass

from fastmcp import Context, FastMCP

app = FastMCP("fastmcp-peer")


@dataclass
class Person:
    name: str
    age: int


def report(result) -> str:
    data = getattr(result, "data", None)
    if hasattr(data, "__dataclass_fields__"):
        data = data.__dict__
    return json.dumps({"action": result.action, "data": data})


@app.tool
async def ask_name(ctx: Context) -> str:
    return report(await ctx.elicit("What is your name?", response_type=str))


@app.tool
async def ask_person(ctx: Context) -> str:
    return report(await ctx.elicit("Who is it for?", response_type=Person))


@app.tool
async def pick_color(ctx: Context) -> str:
    return report(await ctx.elicit("Pick a color", response_type=["red", "green", "blue"]))


@app.tool
async def really(ctx: Context) -> str:
    return report(await ctx.elicit("Really delete everything?", response_type=bool))


if __name__ == "__main__":
    app.run(show_banner=False)
