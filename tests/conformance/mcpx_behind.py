"""The conformance fixture server BEHIND mcpx: fixture_server.py <- mcpx daemon (loopback TCP) <- a bearer proxy.

The suite's server scenarios cannot send mcpx's `Authorization: Bearer <token>` (loopback TCP needs it),
so a tiny forwarding proxy in front of the daemon adds that one header and forwards everything else as
it came: method, path and query, body, and every header including Host and Origin (the
dns-rebinding-protection scenario sends a foreign Host/Origin and expects mcpx to refuse it). Responses
come back as they are, streamed chunk by chunk (SSE is never buffered), compressed bodies left compressed.

    fixture_server.py  127.0.0.1:F/mcp
        ^  config {"servers": {"fixture": {"url": "http://127.0.0.1:F/mcp"}}}
    mcpx daemon        127.0.0.1:D  (/mcp/fixture: the one upstream under its own names)
        ^  + Authorization: Bearer <$MCPX_HOME/token>
    BearerProxy        127.0.0.1:P  ->  the suite runs against http://localhost:P/mcp/fixture

Used by tests/conformance/test_conformance_server_mcpx.py. CLI (prints the table; --keep DIR keeps each run's
`-o` output, checks.json per scenario, and the daemon's home with its logs):

    python tests/conformance/mcpx_behind.py [--run LABEL ...] [--keep DIR] [--scenario S --version V] [--sidecar DIR]
    python tests/conformance/mcpx_behind.py --tasks [--keep DIR] [--scenario tasks-…]   # tasks_fixture.py behind mcpx
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import server_baseline as sb  # noqa: E402

from harness import free_port, make_daemon, scratch_daemon  # noqa: E402

SERVER = "fixture"
EXPECTED_FAILURES = HERE / "mcpx_expected_failures.json"

# hop-by-hop headers (RFC 9110 7.6.1) and framing: the proxy's own connections carry their own
HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "transfer-encoding", "upgrade", "content-length"}


class BearerProxy:
    """A loopback HTTP forwarder that adds `Authorization: Bearer <token>`; runs its own loop in a thread
    (the suite runs in a blocking subprocess.run on the test's thread)."""

    def __init__(self, target: str, token: str) -> None:
        self.target = target.rstrip("/")  # http://127.0.0.1:D
        self.token = token
        self.port = free_port()
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status), for diagnosis
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._client: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._client is not None
        headers = [(k, v) for k, v in request.headers.items()
                   if k.lower() not in HOP and k.lower() != "authorization"]
        headers.append(("Authorization", f"Bearer {self.token}"))
        body = await request.read()
        if body or request.headers.get("Content-Length") is not None:
            headers.append(("Content-Length", str(len(body))))
        try:
            upstream = await self._client.request(
                request.method, self.target + request.path_qs, headers=CIMultiDict(headers), data=body or None,
                allow_redirects=False, auto_decompress=False)
        except aiohttp.ClientError as exc:
            return web.Response(status=502, text=f"bearer proxy: {exc}")
        try:
            out = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for k, v in upstream.headers.items():
                if k.lower() not in HOP:
                    out.headers.add(k, v)
            if upstream.headers.get("Content-Length") is not None:
                out.content_length = int(upstream.headers["Content-Length"])
            self.requests.append((request.method, request.path_qs, upstream.status))
            await out.prepare(request)
            async for chunk in upstream.content.iter_any():  # as it arrives: SSE events pass one by one
                await out.write(chunk)
            await out.write_eof()
            return out
        finally:
            upstream.release()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        # no timeouts, no pooling surprises: a long SSE stream stays open as long as both ends want it
        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None),
                                             skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding",
                                                                "Content-Type"),
                                             auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        # handler_cancellation: a client that hangs up is seen by mcpx as a hang-up too (the proxied request ends)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0,
                               handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()
            await self._client.close()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
        finally:
            pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
            for t in pending:  # streams still open (a GET stream a client never closed): end them quietly
                t.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    def start(self) -> BearerProxy:
        self._thread = threading.Thread(target=self._run, name="bearer-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self._error is not None:
            raise RuntimeError(f"the bearer proxy did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)


@dataclass
class Chain:
    url: str  # what the suite runs against: the proxy's /mcp/fixture
    fixture_url: str  # the fixture directly (its /mcp)
    daemon_url: str  # the daemon's TCP base
    home: Path  # the daemon's MCPX_HOME (daemon.stderr, logs)
    proxy: BearerProxy


@contextlib.contextmanager
def mcpx_chain(home: Path | None = None, sidecar: Path | None = None, fixture: Path = sb.FIXTURE) -> Iterator[Chain]:
    """fixture_server.py (or `fixture`: sb.TASKS_FIXTURE for the tasks-* scenarios) behind a real
    `mcpx daemon --listen 127.0.0.1:D` behind a BearerProxy, the daemon in `home` (kept) or in a scratch home
    (removed after).

    `sidecar`: run the daemon from this copy of sidecar/ (a snapshot, for a stable investigation) instead of the
    working tree's."""
    with sb.fixture_server(script=fixture) as fixture_url:
        fport = fixture_url.rsplit(":", 1)[1].split("/")[0]
        dport = free_port()
        config = {"servers": {SERVER: {"url": f"http://127.0.0.1:{fport}/mcp"}}}
        listen = f"127.0.0.1:{dport}"
        where = {"sidecar": sidecar} if sidecar is not None else {}
        if home is None:
            daemon = scratch_daemon("mcpx-conformance-home-", config, listen, **where)
        else:
            home.mkdir(parents=True, exist_ok=True)
            daemon = make_daemon(home, config, listen, **where)
        with daemon:
            token = (daemon.home / "token").read_text().strip()
            proxy = BearerProxy(f"http://127.0.0.1:{dport}", token).start()
            try:
                yield Chain(f"{proxy.url}/mcp/{SERVER}", fixture_url, f"http://127.0.0.1:{dport}", daemon.home, proxy)
            finally:
                proxy.stop()


# ---------------------------------------------------------------- expected failures


def load_expected_failures(path: Path = EXPECTED_FAILURES) -> dict[str, dict[str, str]]:
    """{run label: {scenario: one-line reason}}; the file also has "bugs" ({id: the cause in full}) and "_about"."""
    doc = json.loads(path.read_text())
    return {label: dict(v) for label, v in (doc.get("runs") or {}).items()}


def expected_failures_problems(path: Path = EXPECTED_FAILURES, baseline: dict | None = None) -> list[str]:
    """What is wrong with the file itself: unknown run labels, reasons that are not one line or name no known
    bug id, entries for scenarios that do not pass directly (those are not mcpx's doing)."""
    doc = json.loads(path.read_text())
    bugs = doc.get("bugs") or {}
    base = (baseline or sb.load_baseline()).get("runs") or {}
    labels = {r[0] for r in sb.RUNS} | {sb.TASKS_RUN[0]}
    problems: list[str] = []
    used: set[str] = set()
    for label, entries in (doc.get("runs") or {}).items():
        if label not in labels:
            problems.append(f"{label}: not a run label of server_baseline.RUNS ({sorted(labels)})")
            continue
        want = (base.get(label) or {}).get("scenarios") or {}
        for scenario, reason in entries.items():
            if not isinstance(reason, str) or not reason.strip() or "\n" in reason:
                problems.append(f"{label} {scenario}: the reason must be one non-empty line")
                continue
            ids = set(re.findall(r"\bB\d+\b", reason))
            used |= ids
            if not ids or ids - set(bugs):
                problems.append(f"{label} {scenario}: the reason must name bug ids from 'bugs' (has {sorted(ids)})")
            if scenario not in want:
                problems.append(f"{label} {scenario}: not a scenario of this run in the baseline")
            elif not want[scenario]["passed"]:
                problems.append(f"{label} {scenario}: does not pass directly either; only mcpx-only failures belong "
                                "here")
    for unused in sorted(set(bugs) - used):
        problems.append(f"bugs.{unused}: no scenario names it any more; remove it")
    return problems


def judge(baseline: dict, results: dict[str, sb.RunResult],
          expected: dict[str, dict[str, str]]) -> tuple[list[str], list[str]]:
    """(regressions: a scenario that passes directly fails through mcpx and is not listed,
        stale: a listed scenario that passes through mcpx now, or is not a direct pass at all)."""
    regressions: list[str] = []
    stale: list[str] = []
    for label, run in results.items():
        want = ((baseline.get("runs") or {}).get(label) or {}).get("scenarios") or {}
        listed = expected.get(label, {})
        for s, b in sorted(want.items()):
            got = run.scenarios.get(s)
            if not b["passed"]:
                if s in listed:
                    stale.append(f"{label} {s}: listed, but it does not pass directly either (baseline fail)")
                continue
            if got is None:
                if s not in listed:
                    regressions.append(f"{label} {s}: passes directly, did not run through mcpx")
                continue
            if not got.passed and s not in listed:
                regressions.append(f"{label} {s}: passes directly, FAILS through mcpx: " + "; ".join(got.failures[:4]))
            elif got.passed and s in listed:
                stale.append(f"{label} {s}: listed as an expected failure ({listed[s]}), but now PASSES through "
                             "mcpx: remove it from mcpx_expected_failures.json")
        for s in sorted(set(listed) - set(want)):
            stale.append(f"{label} {s}: listed, but not a scenario of this run in the baseline")
    for label in sorted(set(expected) - set(results)):
        if label not in {r[0] for r in sb.RUNS} | {sb.TASKS_RUN[0]}:
            stale.append(f"{label}: listed run label is not one of server_baseline.RUNS")
    return regressions, stale


def table(baseline: dict, results: dict[str, sb.RunResult]) -> str:
    lines = []
    for label, run in results.items():
        want = ((baseline.get("runs") or {}).get(label) or {}).get("scenarios") or {}
        n_direct = sum(1 for v in want.values() if v["passed"])
        lines.append(f"{label}: direct {n_direct}/{len(want)}, through mcpx {len(run.passed)}/{len(run.scenarios)} "
                     f"({run.seconds:.1f}s)")
        for s in sorted(set(want) | set(run.scenarios)):
            d = "PASS" if want.get(s, {}).get("passed") else ("FAIL" if s in want else "----")
            r = run.scenarios.get(s)
            m = "----" if r is None else ("PASS" if r.passed else "FAIL")
            lines.append(f"  {d}  {m}  {s}" + ("" if r is None or r.passed else f"   [{'; '.join(r.failures[:2])}]"))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", metavar="LABEL")
    ap.add_argument("--scenario", help="one scenario (with --version) instead of RUNS")
    ap.add_argument("--version", default="0.2.0-alpha.12")
    ap.add_argument("--args", default="", help="extra suite args for --scenario, space-separated")
    ap.add_argument("--keep", type=Path, help="keep the suite outputs (checks.json) and the daemon homes here")
    ap.add_argument("--sidecar", type=Path, help="run the daemon from this copy of sidecar/")
    ap.add_argument("--tasks", action="store_true",
                    help=f"tasks_fixture.py behind mcpx, and {sb.TASKS_RUN[0]} (or --scenario) against it")
    opts = ap.parse_args()
    keep = opts.keep
    fixture = sb.TASKS_FIXTURE if opts.tasks else sb.FIXTURE
    runs = [("single", opts.version, ["--scenario", opts.scenario, *opts.args.split()])] if opts.scenario else (
        [sb.TASKS_RUN] if opts.tasks else [r for r in sb.RUNS if not opts.run or r[0] in opts.run])
    results: dict[str, sb.RunResult] = {}
    for label, version, args in runs:
        where = (keep / label.replace(":", "_")) if keep else None
        # a fresh chain per run, as the test does: what one run taught mcpx does not leak into the next
        with mcpx_chain(home=(where / "home") if where else None, sidecar=opts.sidecar, fixture=fixture) as chain:
            print(f"{label}: suite -> {chain.url} -> mcpx {chain.daemon_url} -> {fixture.name} {chain.fixture_url}",
                  flush=True)
            if label == sb.TASKS_RUN[0]:
                results[label] = sb.run_tasks(chain.url, keep=where)
            else:
                results[label] = sb.run_server_suite(version, chain.url, args, label=label, keep=where)
    if opts.scenario:
        print(results["single"].summary())
        return 0
    base = sb.load_baseline()
    print(table(base, results))
    regressions, stale = judge(base, results, load_expected_failures() if EXPECTED_FAILURES.exists() else {})
    for r in regressions:
        print(f"REGRESSION {r}")
    for s in stale:
        print(f"STALE {s}")
    return 1 if regressions or stale else 0


if __name__ == "__main__":
    sys.exit(main())
