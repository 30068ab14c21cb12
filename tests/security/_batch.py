"""Many scenarios in one sandbox worker: ``python -m tests.security._batch`` (the hostile-input
suite's fast path).

A worker process costs about 0.3 s to start, most of it imports; the suite has over a hundred
entries. This runs them one after another in one process set up exactly as ``app/_worker.py``
sets up its own (the same imports, tensor-size guard, resource limits and privilege drop, by the
same functions), each compiled and run by the worker's own ``compile_job`` and ``run_compiled``,
each with fresh restricted globals. Only entries whose limit is process-wide (CPU seconds, a
kill) need a worker of their own; ``tests/security/test_hostile.py`` runs those through
``run_scenario`` itself.

stdin: ``{"limits": {...}, "jobs": [{"id", "text"}, ...]}``. stdout: for each job a line
``{"id": ...}`` and then the worker's answer line for it (``RunResult.to_dict()``).
"""

from __future__ import annotations

import io
import json
import sys

from app._worker import _preimport, answer, compile_job, confine, run_compiled
from app.runner import UNTRUSTED_FILENAME, RunResult
from app.sandbox import Limits


def main() -> None:
    real_stdout = sys.stdout
    sys.stdout = io.StringIO()  # as in the worker: nothing but answers reach stdout
    batch = json.loads(sys.stdin.read())
    limits = Limits.from_dict(batch["limits"])
    _preimport()
    dropped = confine(limits)
    for job in batch["jobs"]:
        text = job["text"]
        code = compile_job(text, UNTRUSTED_FILENAME)
        result = code if isinstance(code, RunResult) else run_compiled(code, text, UNTRUSTED_FILENAME, limits)
        result.extra["privileges_dropped"] = dropped
        real_stdout.write(json.dumps({"id": job["id"]}) + "\n")
        answer(result, limits, real_stdout)


if __name__ == "__main__":
    main()
