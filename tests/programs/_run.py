"""Run one program of tests/programs on a backend and print what it prints.

    python -m tests.programs._run engine|torch PROGRAM.py

The programs are written for the engine (``import engine as torch``), as a learner would after
changing the import line of a PyTorch tutorial. On ``torch`` they run unchanged through the torch
backend's import shim (``engine`` is handed out as ``torch``) and with torch's sampling routed to
the engine's generator (Note [One random stream for both backends]), so both runs start from the
same random numbers; nothing is recorded.
"""

from __future__ import annotations

import builtins
import runpy
import sys


def main() -> None:
    backend, path = sys.argv[1], sys.argv[2]
    sys.argv = [path]
    if backend == "engine":
        runpy.run_path(path, run_name="__main__")
        return
    from engine.trace.torch_backend import engine_as_torch, engine_rng

    # Only the program's own imports go through the shim (as app/runner.py does for scenarios):
    # the engine's code, the random-stream patch included, keeps importing the engine.
    program_builtins = dict(vars(builtins))
    program_builtins["__import__"] = engine_as_torch(builtins.__import__)
    with engine_rng():
        runpy.run_path(path, init_globals={"__builtins__": program_builtins}, run_name="__main__")


if __name__ == "__main__":
    main()
