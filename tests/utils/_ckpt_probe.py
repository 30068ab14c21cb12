"""Instrumentation of a checkpoint module (``torch.utils.checkpoint`` or ``engine.utils.checkpoint``).

``Probe(cp).installed()`` monkeypatches the module's internals the same way in both libraries and
records an ordered list of events:

- ``frame NAME#i`` when a ``_CheckpointFrame`` is created (``NAME`` is the checkpointed function's
  ``__name__``; `` in_recompute(F)`` is appended when that happens while frame F is recomputed);
- ``pack F[k] [shape]``: the k-th tensor packed by F's ``_checkpoint_hook`` (a ``_Holder``);
- ``unpack F[k]``: an unpack through F's ``_checkpoint_hook``;
- ``recompute F`` / ``recompute_end F``: F's ``_recomputation_hook`` entered / left;
- ``rpack F[k] [shape]``, ``rpack F[k] skip`` (holder already dead), ``rpack F[extra]``: the
  recomputation's pack hook; ``early_stop F n/N`` when it raises ``_StopRecomputationError``;
- ``gc F[k]``: holder k of F was freed (a ``weakref.finalize`` on each holder);
- whatever the scenario adds with ``mark()`` (body runs, phases).

Holder-GC events are kept apart (``gc_by_phase``) because their order among other events need not
match. Events only ever hold strings: the probe must not keep tensors or holders alive.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any


def _shape(x: Any) -> list[int]:
    return [int(s) for s in x.shape]


def marked_body(fn: Callable[..., Any], mark: Callable[[str], None]) -> Callable[..., Any]:
    """``fn`` wrapped to ``mark`` each run: ``body NAME start``, then ``body NAME end`` or ``body NAME
    raised TYPE``. ``Probe`` and ``TraceProbe`` (tests/trace/_probe_view.py) both mark bodies with
    it, so that the two spell them alike."""
    name = fn.__name__

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        mark(f"body {name} start")
        try:
            out = fn(*args, **kwargs)
        except BaseException as e:
            mark(f"body {name} raised {type(e).__name__}")
            raise
        mark(f"body {name} end")
        return out

    return run


class Probe:
    def __init__(self, cp: ModuleType) -> None:
        self.cp = cp
        self.events: list[str] = []
        self.gc_events: list[tuple[str, str]] = []  # (phase, "gc F[k]")
        # Every event including holder GCs, in the order they happened.
        self.timeline: list[str] = []
        self.phase = "forward"
        self.body_runs: Counter[str] = Counter()
        self._pending_name = "?"
        self._n_frames = 0
        self._recomputing: list[str] = []
        self._frames: list[weakref.ref[Any]] = []

    # --- what scenarios call -------------------------------------------------------------------

    def mark(self, event: str) -> None:
        self._ev(event)

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self._ev(f"phase {phase}")

    def body(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a checkpointed function: count its runs and mark start/end/raise."""
        marked = marked_body(fn, self._ev)

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            self.body_runs[fn.__name__] += 1
            return marked(*args, **kwargs)

        return run

    # --- summaries ----------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        kinds = Counter(e.split(" ", 1)[0] for e in self.events)
        return {
            "frames": kinds["frame"],
            "packs": kinds["pack"],
            "unpacks": kinds["unpack"],
            "rpacks": kinds["rpack"],
            "recomputations": kinds["recompute"],
            "early_stops": kinds["early_stop"],
            "holders_gc": len(self.gc_events),
        }

    def recomputed_alive(self) -> int:
        """How many recomputed tensors the live frames still hold (``frame.recomputed``)."""
        frames = [f() for f in self._frames]
        return sum(len(d) for f in frames if f is not None for d in f.recomputed.values())

    def gc_by_phase(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for phase, ev in self.gc_events:
            out.setdefault(phase, []).append(ev)
        return {k: sorted(v) for k, v in out.items()}

    # --- instrumentation ----------------------------------------------------------------------

    def _label(self, frame: Any) -> str:
        return getattr(frame, "_probe_label", "?")

    @contextlib.contextmanager
    def installed(self) -> Iterator[Probe]:
        cp = self.cp
        probe = self
        saved = {
            name: getattr(cp, name)
            for name in (
                "_checkpoint_without_reentrant_generator",
                "_CheckpointFrame",
                "_checkpoint_hook",
                "_recomputation_hook",
            )
        }
        orig_gen = saved["_checkpoint_without_reentrant_generator"]

        def generator(fn: Any, *args: Any, **kwargs: Any) -> Any:
            probe._pending_name = getattr(fn, "__name__", type(fn).__name__)
            return orig_gen(fn, *args, **kwargs)

        class Frame(saved["_CheckpointFrame"]):  # type: ignore[misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self._probe_label = f"{probe._pending_name}#{probe._n_frames}"
                probe._n_frames += 1
                probe._frames.append(weakref.ref(self))
                where = f" in_recompute({probe._recomputing[-1]})" if probe._recomputing else ""
                probe._ev(f"frame {self._probe_label}{where}")

        class CheckpointHook(saved["_checkpoint_hook"]):  # type: ignore[misc]
            def __init__(self, frame: Any) -> None:
                super().__init__(frame)
                pack, unpack = self.pack_hook, self.unpack_hook
                label = probe._label(frame)

                def pack_hook(x: Any) -> Any:
                    holder = pack(x)
                    name = f"{label}[{len(frame.weak_holders) - 1}]"
                    probe._ev(f"pack {name} {_shape(x)}")
                    weakref.finalize(holder, probe._on_gc, name)
                    return holder

                def unpack_hook(holder: Any) -> Any:
                    idx = next((i for i, w in enumerate(frame.weak_holders) if w() is holder), "?")
                    probe._ev(f"unpack {label}[{idx}]")
                    return unpack(holder)

                self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

        class RecomputationHook(saved["_recomputation_hook"]):  # type: ignore[misc]
            def __init__(self, frame_ref: Any, gid: Any) -> None:
                super().__init__(frame_ref, gid)
                pack = self.pack_hook
                self._label = label = probe._label(frame_ref())
                probe._ev(f"recompute {label}")

                def pack_hook(x: Any) -> Any:
                    frame = frame_ref()
                    idx = frame.recomp_counter[gid]
                    total = len(frame.weak_holders)
                    if idx >= total:
                        probe._ev(f"rpack {label}[extra] {_shape(x)}")
                    elif frame.weak_holders[idx]() is None:
                        probe._ev(f"rpack {label}[{idx}] skip")
                    else:
                        probe._ev(f"rpack {label}[{idx}] {_shape(x)}")
                    try:
                        return pack(x)
                    except cp._StopRecomputationError:
                        probe._ev(f"early_stop {label} {idx + 1}/{total}")
                        raise

                self.pack_hook = pack_hook

            def __enter__(self) -> Any:
                probe._recomputing.append(self._label)
                return super().__enter__()

            def __exit__(self, *args: Any) -> Any:
                out = super().__exit__(*args)
                probe._recomputing.pop()
                probe._ev(f"recompute_end {self._label}")
                return out

        replacements = {
            "_checkpoint_without_reentrant_generator": generator,
            "_CheckpointFrame": Frame,
            "_checkpoint_hook": CheckpointHook,
            "_recomputation_hook": RecomputationHook,
        }
        for name, value in replacements.items():
            setattr(cp, name, value)
        try:
            yield self
        finally:
            for name, value in saved.items():
                setattr(cp, name, value)

    def _ev(self, event: str) -> None:
        self.events.append(event)
        self.timeline.append(event)

    def _on_gc(self, name: str) -> None:
        self.gc_events.append((self.phase, f"gc {name}"))
        self.timeline.append(f"gc {name}")
