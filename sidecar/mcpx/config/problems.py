"""What is wrong with a config: each problem naming its file and field, the error that carries them all, and the
warnings a config that holds may still deserve."""

from __future__ import annotations

from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, Tag, ValidationError

from mcpx.config.models import START_FLOOR, Config, data_servers
from mcpx.shared.errors import McpxError


@dataclass(frozen=True)
class Problem:
    path: str
    field: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.message}" if self.field else f"{self.path}: {self.message}"


class ConfigError(McpxError):
    """A config that does not hold: every problem found, each naming its file and field.

    `path`, `field` and `problem` are the first one's."""

    def __init__(self, path: str, field: str | None, message: str, more: list[Problem] | None = None) -> None:
        self.path, self.field, self.problem = path, field, message
        self.problems = [Problem(path, field, message), *(more or [])]
        if len(self.problems) == 1:
            super().__init__(str(self.problems[0]))
        else:
            super().__init__(f"{len(self.problems)} problems:\n  " + "\n  ".join(map(str, self.problems)))

    @classmethod
    def of(cls, problems: list[Problem]) -> ConfigError:
        first, *rest = problems
        return cls(first.path, first.field, first.message, rest)


def _field_of(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("StdioServer", "HttpServer", "OpenApiServer", "CommandsServer", "RuleWhen", "stdio", "http"):
            continue  # pydantic names the union arm; people name fields
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


NO_SHAPE = ("needs one of 'command' (an MCP server over stdio), 'url' (over HTTP), 'openapi' (a REST service) or "
            "'commands' (commands as tools)")
SHAPE_KEYS = ("command", "url", "openapi", "commands")


def problems_of(exc: ValidationError, data: dict[str, Any], origin: str) -> list[Problem]:
    """Every problem pydantic found, in the words of the config's own fields, each once."""
    out: list[Problem] = []
    misspelt: set[str] = set()  # servers whose missing command or url is a key spelt wrong, said so already
    for err in exc.errors():
        message = err["msg"].removeprefix("Value error, ")
        loc = err["loc"]
        fld = _field_of(loc)
        shapeless = None
        if loc[:1] == ("servers",) and len(loc) > 1 and err["type"] in ("missing", "extra_forbidden"):
            name = str(loc[1])  # a server's name may hold a '.'
            entry = data_servers(data).get(name)
            if isinstance(entry, dict) and not any(k in entry for k in SHAPE_KEYS):
                shapeless = name
        if err["type"] == "extra_forbidden":
            # the keys of the object the key is in: of either shape, for a server that is neither yet
            shapes = ("stdio", "http", "OpenApiServer", "CommandsServer")
            known = [k for shape in shapes for k in _keys_at(("servers", "", shape))] if shapeless \
                else _keys_at(loc[:-1])
            message, guess = unknown_key(str(loc[-1]), known)
            if shapeless and guess in SHAPE_KEYS:
                misspelt.add(shapeless)
        elif shapeless:
            # say which shapes exist, rather than each field one of them lacks
            fld, message = f"servers.{shapeless}", NO_SHAPE
        problem = Problem(origin, fld or None, message)
        if problem not in out:
            out.append(problem)
    return [p for p in out if not (p.message == NO_SHAPE and p.field in {f"servers.{n}" for n in misspelt})]


def unknown_key(key: str, known: list[str]) -> tuple[str, str | None]:
    """What to say of a key no field has, and the known key it is most likely a misspelling of (or None)."""
    import difflib  # here: only a config that is wrong needs it, and every daemon and CLI command loads this module

    by_lower = {k.lower(): k for k in sorted(set(known))}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {by_lower[close[0]]!r}?", by_lower[close[0]]
    return "unknown key" + (" (the keys here: " + ", ".join(by_lower.values()) + ")" if known else ""), None


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys, as the file spells them, of the object at `loc` (a pydantic error's place in the config)."""
    shape: Any = Config
    for item in loc:
        shape = _inside(shape, item)
    if not (isinstance(shape, type) and issubclass(shape, BaseModel)):
        return []
    keys = [info.alias or name for name, info in shape.model_fields.items()]
    return [*keys, "mcpServers", "mcp"] if shape is Config else keys  # Config's other names for servers


def _inside(shape: Any, item: int | str) -> Any:
    """The type of what is at `item` in a value of type `shape`; None when that cannot be told."""
    while get_origin(shape) is Annotated:
        shape = get_args(shape)[0]
    if get_origin(shape) in (Union, UnionType):
        arms = [arm for arm in get_args(shape) if arm is not type(None)]
        for arm in arms:  # a tagged union names its arm in the error's place
            tags = [m.tag for m in getattr(arm, "__metadata__", ()) if isinstance(m, Tag)]
            inner = get_args(arm)[0] if get_origin(arm) is Annotated else arm
            if item in tags or item == getattr(inner, "__name__", None):
                return inner
        if len(arms) != 1:
            return None
        return _inside(arms[0], item)  # X | None: the place is X's
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        for name, info in shape.model_fields.items():
            if item in (info.alias, name):
                return info.annotation
        return None
    if get_origin(shape) is list and isinstance(item, int):
        return get_args(shape)[0]
    if get_origin(shape) is dict:
        return get_args(shape)[1]
    return None


def config_warnings(config: Config, origin: str) -> list[Problem]:
    """What holds but does not do all it says: `mcpx config check` tells it, the daemon logs it once."""
    out: list[Problem] = []
    for name, entry in config.servers.items():
        if entry.timeout < START_FLOOR:
            out.append(Problem(origin, f"servers.{name}.timeout", f"{entry.timeout:g}s is under the {START_FLOOR:g}s "
                               f"minimum for a start: its calls time out after {entry.timeout:g}s, but its start "
                               f"(process and handshake) may take {START_FLOOR:g}s"))
    for index, rule in enumerate(config.elicit.approvals):
        if rule.match.mode != "url" and rule.match.method is None:  # a method: only mcpx's yes/no confirmations
            out.append(Problem(origin, f"elicit.approvals[{index}]", "approvals apply to yes/no confirmations (a "
                               "form with no fields or one yes/no) and url consent: a form question with other "
                               "fields that this rule matches keeps the one-answer rule"))
    return out
