"""What opening a trace file costs the server, as ratios measured in one run.

    .venv/bin/python bench/bench_import.py [--scenario mlp_memory_nested] [--copies 30] [--repeat 3]

``POST /api/traces`` checks an uploaded document in full before storing it (Note [Opening a
trace file] in app/imported.py). This times, on one large trace (a scenario's events repeated
``--copies`` times, ids renumbered so it stays valid):

- ``json``: ``json.loads`` of the body, the floor any check sits on;
- ``check``: ``engine.trace.validate.check_document`` (the compiled schema, then the id invariants);
- ``jsonschema``: the same schema checked by ``jsonschema``, event by event (what ``check``
  replaced: Note [Checking a trace document]);
- ``replay``: the reducer and the captions over every event (``read_trace``'s last step, and what
  storing the run costs again).

Reported: microseconds per event, and ``check / json``, ``jsonschema / check``, ``replay / json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

from _timing import best

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.runner import SCENARIOS_DIR, run_scenario  # noqa: E402
from engine.trace.captions import caption  # noqa: E402
from engine.trace.state import initial_state, step  # noqa: E402
from engine.trace.validate import INTRODUCES, REFERS, check_document  # noqa: E402


def repeated(doc: dict[str, Any], copies: int) -> dict[str, Any]:
    """``doc``'s events ``copies`` times over, each copy's ids shifted past the previous one's."""
    events = doc["events"]
    sizes = {
        sort: 1 + max((e[sort] for e in events if INTRODUCES.get(e["kind"]) == sort), default=-1)
        for sort in INTRODUCES.values()
    }
    gids = 1 + max((e["gid"] for e in events if e["gid"] is not None), default=-1)
    refs = {(kind, field): sort for sort, fields in REFERS.items() for kind, field in fields.items()}
    out: list[dict[str, Any]] = []
    for k in range(copies):
        for e in events:
            e = copy.deepcopy(e)
            for (kind, field), sort in refs.items():
                if e["kind"] == kind and e.get(field) is not None:
                    e[field] += k * sizes[sort]
            if (sort := INTRODUCES.get(e["kind"])) is not None:
                e[sort] += k * sizes[sort]
            if e["kind"] == "node_new":
                e["next"] = [[None if n is None else n + k * sizes["node"], i] for n, i in e["next"]]
            if e["gid"] is not None:
                e["gid"] += k * gids
            e["seq"] = len(out)
            out.append(e)
    return {**doc, "meta": {**doc["meta"], "n_events": len(out)}, "events": out}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="mlp_memory_nested")
    parser.add_argument("--copies", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    result = run_scenario(SCENARIOS_DIR / f"{args.scenario}.py", trusted=True)
    assert result.trace is not None, result.error
    doc = repeated(result.trace, args.copies)
    check_document(doc)  # the workload must be a valid trace, or the timings mean nothing
    body = json.dumps(doc)
    n = len(doc["events"])

    import jsonschema

    from engine.trace import schema

    defs = schema()["$defs"]
    validators = {
        k: jsonschema.Draft202012Validator({**defs[f"kind_{k}"], "$defs": defs})
        for k in {e["kind"] for e in doc["events"]}
    }

    def with_jsonschema() -> None:
        for e in doc["events"]:
            validators[e["kind"]].is_valid(e)

    def replay() -> None:
        state = initial_state()
        for e in doc["events"]:
            caption(state, e)
            step(state, e)

    times = {
        "json": best(lambda: json.loads(body), args.repeat),
        "check": best(lambda: check_document(doc), args.repeat),
        "jsonschema": best(with_jsonschema, 1),  # slow: once is enough
        "replay": best(replay, args.repeat),
    }
    print(f"{n} events, {len(body) / 1e6:.1f} MB of JSON")
    for name, t in times.items():
        print(f"  {name:<11} {t * 1e6 / n:8.2f} us/event   {t:7.3f} s")
    print(f"  check / json        {times['check'] / times['json']:6.2f}")
    print(f"  jsonschema / check  {times['jsonschema'] / times['check']:6.2f}")
    print(f"  replay / json       {times['replay'] / times['json']:6.2f}")


if __name__ == "__main__":
    main()
