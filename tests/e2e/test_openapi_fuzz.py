"""The OpenAPI document is honest: schemathesis fuzzes the live daemon over TCP from its own /v1/openapi.json.

Every response must be one the document lists, with the content type, headers and schema it gives;
none may be a 5xx; whatever the document forbids must be refused. Bounded (a fixed number of cases
per operation and mode) and deterministic (derandomized), so it neither drags nor flakes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gateway_helpers import stdio
from harness import Daemon, free_port, make_daemon

CONFORMANCE = [status_code_conformance, content_type_conformance, response_headers_conformance,
               response_schema_conformance]
CHECKS = [not_a_server_error, *CONFORMANCE, negative_data_rejection]
EXAMPLES = 30  # per operation and per mode (valid, invalid)
REJECTIONS = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]  # never a 5xx
LONG_POLLS = ("/v1/elicit/{id}/wait", "/v1/tasks/{id}/result", "/v1/call/{server}/{tool}")


@pytest.fixture
def fuzzed(home: Path) -> Iterator[Daemon]:
    with make_daemon(home, {"servers": {}}, listen=f"127.0.0.1:{free_port()}") as d:
        yield d


def auth(d: Daemon) -> dict[str, str]:
    return {"Authorization": f"Bearer {(d.home / 'token').read_text().strip()}"}


def live_schema(d: Daemon) -> Any:
    """The daemon's own document, with its token given to schemathesis as the document's bearer scheme.

    Every case carries it: the invalid ones are spent on what the routes take, not on a missing token
    (a 401 that the document lists everywhere and test_daemon_lifecycle covers)."""
    config = schemathesis.Config.from_dict({
        "auth": {"openapi": {"bearer": {"bearer": auth(d)["Authorization"][7:]}}},
        "generation": {"with-security-parameters": False},
        # schemathesis's list of statuses that reject invalid data, with 413: a body over the daemon's limit is
        # refused before it is read, however invalid it is (the document lists the 413). Without it, the rare
        # invalid case of megabytes (4.7 MB, generated in some runs) fails a correct refusal.
        "checks": {"negative_data_rejection": {"expected-statuses": REJECTIONS}}})
    return schemathesis.openapi.from_url(f"http://{d.listen}/v1/openapi.json", config=config, headers=auth(d))


def every_ref(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from every_ref(value)
    elif isinstance(node, list):
        for value in node:
            yield from every_ref(value)


def resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def bounded(case: Any) -> None:
    """A long poll waits at most a moment: the fuzzer checks what comes back, not how long it can wait."""
    for name in ("timeout", "wait"):
        value = (case.query or {}).get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0.2:
            case.query[name] = 0.2


def sent(case: Any, base: str, timeout: float) -> Any:
    """The case's response. An event stream is read for `timeout` seconds, but its headers may be later than that
    on a loaded machine (the read timeout covers them too): then it is sent again with twice the time, up to 10 s,
    so a slow daemon is waited for and a silent one still fails the test."""
    while True:
        try:
            return case.call(base_url=base, timeout=timeout)
        except requests.Timeout:
            if timeout >= 10:
                raise
            timeout = min(timeout * 2, 10)


# About 35 s of CPU, nearly all hypothesis drawing cases in the test's own process: 90 s of wall in a full run on 2
# cores, and over the suite's 120 s default beside a loaded machine. Its bound is the cases' count, not time.
@pytest.mark.timeout(600)
def test_the_document_fuzzed_against_the_live_daemon(fuzzed: Daemon) -> None:
    base = f"http://{fuzzed.listen}"
    schema = live_schema(fuzzed)
    document = schema.raw_schema
    refs = set(every_ref(document))
    assert refs and all(resolve(document, ref) for ref in refs)  # every $ref resolves in the document itself

    failures: list[str] = []
    cases: Counter[str] = Counter()
    statuses: Counter[tuple[str, int]] = Counter()
    for result in schema.get_all_operations():
        operation = result.ok()  # an operation schemathesis cannot read raises here
        # an event stream never ends by itself: what it sends in a moment is what gets checked
        timeout = 0.15 if operation.path == "/v1/events" else 10

        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                      phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
            def run(case: Any) -> None:
                if operation.path in LONG_POLLS:
                    bounded(case)
                response = sent(case, base, timeout)
                cases[operation.label] += 1
                statuses[(mode.value, response.status_code)] += 1
                try:
                    case.validate_response(response, checks=CHECKS)
                except FailureGroup as exc:  # every failure is kept, none is shrunk: the run stays bounded
                    failures.append(f"{operation.label} {mode.value} -> {response.status_code}: "
                                    f"{str(exc)[:1500]}\n{case.as_curl_command()}")

            try:
                run()
            except Unsatisfiable:  # nothing in this operation can be made invalid: no invalid cases to send
                assert mode is GenerationMode.NEGATIVE

    total = sum(cases.values())
    print(f"schemathesis: {total} cases over {len(cases)} operations, statuses {dict(sorted(statuses.items()))}, "
          f"{len(failures)} failures")
    documented = {f"{method.upper()} {path}" for path, operations in document["paths"].items() for method in operations}
    # all but the document's own route, which schemathesis leaves out; routes with nothing to vary are sent once
    assert set(cases) == documented - {"GET /v1/openapi.json"}, set(cases) ^ documented
    assert total >= 10 * EXAMPLES * 2, cases
    assert not [status for _, status in statuses if status >= 500], statuses
    assert not failures, "\n\n".join(failures[:10])


@pytest.fixture
def calling(home: Path) -> Iterator[Daemon]:
    with make_daemon(home, {"servers": {"sdk": stdio("sdk_server.py")}}, listen=f"127.0.0.1:{free_port()}") as d:
        yield d


def test_what_a_real_call_answers_is_what_the_document_says(calling: Daemon) -> None:
    """The fuzzer cannot guess a server, a tool or a task: here each call route answers for real, and is checked."""
    base = f"http://{calling.listen}"
    schema = live_schema(calling)
    seen: list[tuple[str, int]] = []

    def checked(path: str, method: str, **data: Any) -> Any:
        case = schema[path][method].Case(**{**data, "headers": {**data.get("headers", {}), **auth(calling)}})
        # the event stream is read for a moment: its replay of the log arrives at once
        response = sent(case, base, 1 if path == "/v1/events" else 30)
        # conformance only: the one 5xx here is the documented 502 of a call that failed, asked for below
        case.validate_response(response, checks=CONFORMANCE)
        seen.append((f"{method} {path}", response.status_code))
        return response

    call, task = "/v1/call/{server}/{tool}", "/v1/tasks/{id}"
    asked = checked(call, "POST", path_parameters={"server": "sdk", "tool": "need_repo"}, body={}).json()
    tid, eid = asked["task"], asked["elicitation"]["id"]
    checked(task, "GET", path_parameters={"id": tid})
    checked(task + "/result", "GET", path_parameters={"id": tid}, query={"timeout": 0})
    checked("/v1/elicit/{id}/{action}", "POST", path_parameters={"id": eid, "action": "accept"},
            body={"content": {"repo": "a/b"}})
    checked(task + "/result", "GET", path_parameters={"id": tid}, query={"timeout": 20})
    checked(task + "/cancel", "POST", path_parameters={"id": tid})  # already finished
    checked(call, "POST", path_parameters={"server": "sdk", "tool": "echo"}, body={"arguments": {"text": "hi"}})
    checked(call, "POST", path_parameters={"server": "sdk", "tool": "need_repo"}, body={"elicit": "error"})
    running_call = checked(call, "POST", path_parameters={"server": "sdk", "tool": "sleepy"}, query={"wait": 0},
                           body={"arguments": {"seconds": 30}}).json()
    checked(task + "/cancel", "POST", path_parameters={"id": running_call["task"]})
    checked("/v1/tools", "GET")
    checked("/v1/tools/{server}", "GET", path_parameters={"server": "sdk"})
    checked("/v1/events", "GET", headers={"Last-Event-ID": "0"})  # every record so far, each against its schema
    assert [status for _, status in seen] == [202, 200, 202, 200, 200, 409, 200, 502, 202, 200, 200, 200, 200], seen
