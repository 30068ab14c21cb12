"""One workload of bench/workloads.py on the engine, a few times over: a target for a profiler.

    .venv/bin/python -m pyinstrument -i 0.0005 bench/profile_workload.py chain [--record] [--times 5]

``--record`` runs it inside ``engine.trace.record()`` (what the web app always does).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import workloads  # noqa: E402

import engine  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workload", choices=sorted(workloads.WORKLOADS))
    parser.add_argument("--record", action="store_true", help="inside engine.trace.record()")
    parser.add_argument("--times", type=int, default=5)
    args = parser.parse_args()
    step = workloads.build(engine, args.workload)
    step()  # warm up
    for _ in range(args.times):
        if args.record:
            with engine.trace.record():
                step()
        else:
            step()


if __name__ == "__main__":
    main()
