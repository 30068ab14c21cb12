"""``python -m engine.trace.torch_backend SCENARIO [-o OUT.json]``: the trace of a scenario file
recorded from whatever torch this interpreter has (2.8.0 or 2.13.0).

Used to record under a torch that cannot share the process with another one (the tests run it
with a torch 2.13.0 interpreter); ``autograd-lens trace --backend torch`` is the everyday way.
Exit codes: 0 success, 1 the scenario raised (the trace, up to the error, is still written),
2 torch is missing or its version is not supported.
"""

from __future__ import annotations

import argparse
import builtins
import gc
import json
import sys
from pathlib import Path
from typing import Any

from engine.trace import mark, torch_backend


def _print(*objects: Any, sep: str | None = " ", end: str | None = "\n", **_: Any) -> None:
    """The scenario's ``print``: to stderr (stdout may be the trace), and a ``mark`` event in the
    trace, as ``autograd-lens trace`` records it (app/runner.py)."""
    text = (" " if sep is None else sep).join(str(o) for o in objects) + ("\n" if end is None else end)
    sys.stderr.write(text)
    if label := text.rstrip("\n"):
        mark(label, stream="stdout")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.trace.torch_backend")
    parser.add_argument("scenario", type=Path)
    parser.add_argument("-o", "--output", help="the trace JSON (default: stdout)")
    args = parser.parse_args(argv)
    try:
        torch_backend.import_torch()
    except (ImportError, RuntimeError) as e:
        print(f"torch_backend: {e}", file=sys.stderr)
        return 2
    path: Path = args.scenario.resolve()
    text = path.read_text(encoding="utf-8")
    code = compile(text, str(path), "exec", dont_inherit=True)
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(path)}
    namespace["__builtins__"] = {**vars(builtins), "print": _print}
    failed = False
    gc.disable()  # holders die by reference counting, as in the engine's runs
    with torch_backend.engine_is_torch(namespace), torch_backend.engine_rng():
        recording = torch_backend.record(source_files={str(path): text})
        try:
            with recording:
                exec(code, namespace)
        except Exception as e:  # noqa: BLE001 - the scenario's error is part of its trace
            print(f"torch_backend: the scenario raised {type(e).__name__}: {e}", file=sys.stderr)
            failed = True
    document = json.dumps(recording.trace.to_json())
    if args.output:
        Path(args.output).write_text(document, encoding="utf-8")
    else:
        sys.stdout.write(document + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
