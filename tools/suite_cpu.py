#!/usr/bin/env python3
"""Where the suite's CPU goes, by kind of process: the test run under the kernel's process accounting.

The suite is CPU-bound (three workers on two cores), so its wall time is its CPU time over the cores, and what
makes it long is the sum of every process it starts: daemons, the tests' MCP peers, CLI commands, real hosts.
pytest's --durations shows none of that. Process accounting (`accton`, Debian's acct; needs root) records the
CPU of every process as it exits; a `.pth` file put in the venv for the run names each Python process after
what it runs (`mx-daemon`, `mx-call`, `p-sdk_server`, `xdist`), so they can be told apart. Every other
process keeps the name the kernel gives it (node, postgres, chromium, a thread's name for Bun).

    sudo apt-get install acct
    python3 tools/suite_cpu.py -- -n 3 --dist loadgroup tests/e2e     # pytest's arguments after --
    python3 tools/suite_cpu.py --report /var/log/account/pacct.suite  # the table of an earlier run

Only processes descended from the run are counted (an orphan re-parented to init is lost; the total printed
by /usr/bin/time beside it says how much). A diagnostic, not a test or a bench: it changes nothing in the
tree and removes its .pth file when the run ends.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACCT = Path("/var/log/account/pacct.suite")
HZ = 100.0  # dump-acct prints CPU in the kernel's accounting ticks

# The .pth line: run at every start of the venv's Python, before the program. It reads the process's own
# command line and sets its name (prctl PR_SET_NAME, 15 bytes), which the accounting record keeps.
NAMER = r'''
import os as _o, ctypes as _c
def _mcpx_name():
    try:
        argv = [a.decode(errors="replace") for a in open("/proc/self/cmdline", "rb").read().split(b"\0") if a][1:]
    except OSError:
        return
    while argv and argv[0].startswith("-") and argv[0] not in ("-m", "-c"):
        argv = argv[1:]
    words = [a for a in argv[2:] if not a.startswith("-")]
    if argv[:1] == ["-m"] and len(argv) > 1:
        name = ("mx-" + (words[0] if words else "help")) if argv[1] == "mcpx" else "m-" + argv[1].split(".")[-1]
    elif argv[:1] == ["-c"]:
        name = "xdist" if "exec(eval(" in (argv[1] if len(argv) > 1 else "") else "py-c"
    elif argv:
        base = _o.path.basename(argv[0])
        rest = [a for a in argv[1:] if not a.startswith("-")]
        name = ("mx-" + (rest[0] if rest else "help")) if base == "mcpx" else "p-" + base.removesuffix(".py")
    else:
        return
    try:
        _c.CDLL(None).prctl(15, _c.c_char_p(name[:15].encode()), 0, 0, 0)
    except Exception:
        pass
_mcpx_name()
'''


def pth_line() -> str:
    return "import sys; exec(" + repr(NAMER) + ", {})\n"  # a namespace of its own: its function sees its imports


def run(pytest_args: list[str], venv: Path) -> int:
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    pth = purelib / "zz_suite_cpu_names.pth"
    PACCT.write_bytes(b"")
    pth.write_text(pth_line())
    try:
        subprocess.run(["accton", str(PACCT)], check=True, stdout=subprocess.DEVNULL)
        try:
            proc = subprocess.Popen(["/usr/bin/time", "-f", "the run: wall %e s, user %U s, system %S s",
                                     str(venv / "bin" / "python"), "-m", "pytest", *pytest_args], cwd=ROOT)
            code = proc.wait()
        finally:
            subprocess.run(["accton", "off"], check=False, stdout=subprocess.DEVNULL)
    finally:
        pth.unlink(missing_ok=True)
    report(PACCT, proc.pid)
    return code


def report(pacct: Path, root: int | None, top: int = 40) -> None:
    dumped = subprocess.run(["dump-acct", str(pacct)], capture_output=True, text=True, check=True).stdout
    rows: list[tuple[str, float, int, int]] = []
    for line in dumped.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) >= 11:
            rows.append((f[0], float(f[2]) + float(f[3]), int(f[9]), int(f[10])))
    parent = {pid: ppid for _, _, pid, ppid in rows}

    def ours(pid: int) -> bool:
        for _ in range(256):
            if root is None or pid == root:
                return True
            pid = parent.get(pid, 0)
            if not pid:
                return False
        return False

    kinds: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for name, cpu, pid, _ in rows:
        if ours(pid):
            kinds[name][0] += 1
            kinds[name][1] += cpu / HZ
    total = sum(cpu for _, cpu in kinds.values())
    print(f"\nCPU by kind of process: {total:.0f} s over {sum(int(n) for n, _ in kinds.values())} processes")
    for name, (n, cpu) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {name:16s} {int(n):6d} processes  {cpu:8.1f} s  {cpu / total:6.1%}  {cpu / n * 1000:7.0f} ms each")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv", help="the venv whose Python runs the suite")
    parser.add_argument("--report", type=Path, help="print the table of an earlier run's accounting file")
    parser.add_argument("pytest_args", nargs="*", help="pytest's arguments (after --)")
    args = parser.parse_args()
    if args.report:
        report(args.report, None)
        return 0
    if os.geteuid() != 0:
        print("process accounting needs root (accton)", file=sys.stderr)
        return 2
    return run(args.pytest_args, args.venv)


if __name__ == "__main__":
    sys.exit(main())
