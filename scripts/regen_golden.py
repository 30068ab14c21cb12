"""Rewrite the golden traces of the bundled scenarios (``tests/golden/<scenario>.json``).

    .venv/bin/python scripts/regen_golden.py            # every scenario
    .venv/bin/python scripts/regen_golden.py single_checkpoint nested_checkpoint
    .venv/bin/python scripts/regen_golden.py --check    # exit 1 if any golden file is out of date

Review the diff (``git diff tests/golden``) before committing: every changed event is a change in
what the engine does or records. Golden files of scenarios that no longer exist are removed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.runner import list_scenarios  # noqa: E402
from tests.scenarios._golden import GOLDEN_DIR, dumps, golden_path, run_golden  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario ids (default: all)")
    parser.add_argument("--check", action="store_true", help="only report out-of-date files")
    args = parser.parse_args(argv)
    infos = list_scenarios()
    known = {s.id for s in infos}
    unknown = sorted(set(args.scenarios) - known)
    if unknown:
        print(f"unknown scenarios: {', '.join(unknown)}", file=sys.stderr)
        return 2
    selected = [s for s in infos if not args.scenarios or s.id in args.scenarios]
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    stale = 0
    for info in selected:
        path = golden_path(info.id)
        text = dumps(run_golden(info))
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old == text:
            continue
        stale += 1
        status = "new" if old is None else "changed"
        print(f"{status:8s} {path.relative_to(GOLDEN_DIR.parents[1])}")
        if not args.check:
            path.write_text(text, encoding="utf-8")
    if not args.scenarios:
        for path in sorted(GOLDEN_DIR.glob("*.json")):
            if path.stem not in known:
                stale += 1
                print(f"{'orphan':8s} {path.relative_to(GOLDEN_DIR.parents[1])}")
                if not args.check:
                    path.unlink()
    if args.check and stale:
        print(f"{stale} golden file(s) out of date: run {Path(__file__).name} to regenerate", file=sys.stderr)
        return 1
    print(f"{len(selected)} scenario(s), {stale} golden file(s) {'out of date' if args.check else 'written'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
