"""A class on one server: 200 viewers open the 20 first bundled scenarios at once (``POST
/api/runs``, then the run's event stream up to its first message), against a real server process
with the default settings, on a fresh database.

    .venv/bin/python bench/bench_class.py [--viewers 200] [--scenarios 20] [--processes 1]

Prints, for the cold class (nothing run yet: the first click on a card runs it, every other one
reuses that run, Note [A class on one server] in app/runs.py) and for the warm one (the next
lesson: every run stored), the time from the click to the first event (p50, p95, max), the status
codes (no 503), and the server's CPU time per viewer, which does not depend on how busy the
machine is. ``--processes N`` serves the class from N server processes on one database (docs/api.md,
"Several server processes"), the viewers spread over them. The viewers all live in this one
process, on the same machine as the server: on a loaded two-core machine they compete with it for
the CPU, so the times are an upper bound of what a class on its own machines sees.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.load._server import Server, Viewer, class_of, percentile  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat, in clock ticks)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report(name: str, viewers: list[Viewer], cpu: float) -> None:
    seconds = [v.seconds for v in viewers]
    statuses = dict(sorted(Counter(v.status for v in viewers).items()))
    first = sum(v.first == "events" for v in viewers)
    print(
        f"{name}: first event p50 {percentile(seconds, 50):.2f} s, p95 {percentile(seconds, 95):.2f} s, "
        f"max {max(seconds):.2f} s; {first}/{len(viewers)} got their first event; statuses {statuses}; "
        f"server CPU {1000 * cpu / len(viewers):.1f} ms per viewer"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=200)
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument(
        "--no-access-log", action="store_true", help="serve with AUTOGRAD_LENS_ACCESS_LOG=0 (docs/api.md)"
    )
    args = parser.parse_args()
    env = {"AUTOGRAD_LENS_ACCESS_LOG": "0"} if args.no_access_log else None
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp, ExitStack() as stack:
        servers = [stack.enter_context(Server(Path(tmp) / "data", env=env)) for _ in range(args.processes)]
        status, listed = servers[0].api("/api/scenarios")
        assert status == 200
        scenarios = [s["id"] for s in listed][: args.scenarios]
        print(f"{args.viewers} viewers, {len(scenarios)} scenarios, {args.processes} server process(es)")
        for name in ("cold", "warm"):
            before = sum(cpu_seconds(s.pid) for s in servers)
            viewers = class_of([s.url for s in servers], scenarios, args.viewers)
            report(name, viewers, sum(cpu_seconds(s.pid) for s in servers) - before)
            for run_id in {v.run_id for v in viewers if v.run_id}:
                servers[0].finished(run_id)


if __name__ == "__main__":
    main()
