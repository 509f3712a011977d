"""The suite's scheduler (tests/scheduling.py), run as ./dev test runs it: three xdist workers under --dist loadgroup,
on a suite of its own in which six host tests (tests/hosts/) run while the other tests wait for all of them to
end. The host tests are kept to two lanes (two workers); the third worker runs the rest beside them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness import PATIENCE

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from scheduling import HostLanes

def pytest_xdist_make_scheduler(config, log):
    return HostLanes(config, log)
"""

HOST = """
import os, pathlib
import pytest

@pytest.mark.parametrize("n", range(3))
def test_host(n):
    ran = pathlib.Path(os.environ["RAN"])
    (ran / f"host-{__name__}-{n}").write_text(os.environ["PYTEST_XDIST_WORKER"])
"""

OTHER = """
import os, pathlib, time
import pytest

@pytest.mark.parametrize("n", range(6))
def test_other(n):
    ran = pathlib.Path(os.environ["RAN"])
    (ran / f"other-{n}").write_text(os.environ["PYTEST_XDIST_WORKER"])
    deadline = time.monotonic() + 60
    while len(list(ran.glob("host-*"))) < 6:  # every host test has run (each writes its file as it ends)
        assert time.monotonic() < deadline, "the host tests did not all run while the others waited"
        time.sleep(0.05)
"""


def test_host_tests_keep_to_two_of_three_workers_and_the_third_runs_the_rest_beside_them(tmp_path: Path) -> None:
    suite, ran = tmp_path / "suite", tmp_path / "ran"
    (suite / "tests" / "hosts").mkdir(parents=True)
    (suite / "tests" / "other").mkdir()
    ran.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "conftest.py").write_text(CONFTEST)
    for name in ("test_a", "test_b"):  # two host modules, three tests each
        (suite / "tests" / "hosts" / f"{name}.py").write_text(HOST)
    (suite / "tests" / "other" / "test_other.py").write_text(OTHER)
    argv = [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-n", "3", "--dist", "loadgroup", "-q"]
    done = subprocess.run(argv, cwd=suite, env={**_env(), "RAN": str(ran)}, capture_output=True, text=True,
                          timeout=PATIENCE * 2)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    workers = {p.name: p.read_text() for p in ran.iterdir()}
    hosts = {w for name, w in workers.items() if name.startswith("host-")}
    others = {w for name, w in workers.items() if name.startswith("other-")}
    assert len([n for n in workers if n.startswith("host-")]) == 6 and len(hosts) == 2, workers
    assert others - hosts, f"no worker ran the other tests while the hosts' ran: {workers}"


def _env() -> dict[str, str]:
    """This environment without the outer run's pytest and mcpx variables (its worker's name among them), and no
    plugin but xdist."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MCPX_"))}
    return {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # xdist alone (-p): the workers start in a fraction
