"""The names of tensors: ``tensor_new.name``, from the variables that hold them.

``RecorderCore`` (``_core.py``) inherits ``TensorNames``. While some tensor is unnamed, every event
emitted from a recorded file scans the variables of that file's frame; a tensor found in one gets
its name, a model's parameters their path in the model variable (``m.blocks.0.net.0.weight``).
Naming decides which events are final:

Note [Final events]
~~~~~~~~~~~~~~~~~~
An event never changes once emitted, with one exception: ``tensor_new.name``, filled in when a
later event finds the tensor in a variable (``y = x.sin()`` binds ``y`` after the op's events).
So a consumer that wants events while the run goes on (the web app streams them) takes the
prefix ``final`` of ``events``: everything before the oldest tensor_new that may still be named.
For that prefix to move, a name must be settled at some point: a tensor can be named until the
*top-level statement* that made it completes (the line of the outermost recorded frame changes:
the scenario's module-level statement, or the statement of the ``with trace.record()`` block),
and is named after what that statement bound; a tensor it leaves unbound (an intermediate, the
checkpoint's dummy) stays unnamed. The prefix then moves at least once per top-level statement;
a scenario whose whole run is one call (``main()``) becomes final only at its end.
"""

from __future__ import annotations

from inspect import CO_OPTIMIZED
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.trace._core import TensorEntry

# A top-level statement: (id of the outermost recorded frame, its line), or None outside them.
Statement = tuple[int, int] | None


def _locals_of(frame: FrameType) -> dict[str, Any]:
    """A copy of a frame's variables, without keeping them alive.

    Note [Reading f_locals]
    ~~~~~~~~~~~~~~~~~~~~~~~
    In Python 3.11 ``frame.f_locals`` of a function fills a dict stored on the frame, which keeps
    every local's value alive until the next read or the frame's exit: a tensor rebound after we
    read would die later than it should, and with it the nodes and holders it keeps alive. So the
    dict is emptied once copied (its keys are only read back into the frame by tracers, which
    refill it first). Module and class bodies have real namespaces, which are left alone.
    """
    scope = frame.f_locals
    if frame.f_code.co_flags & CO_OPTIMIZED and scope is not frame.f_globals:
        copy = dict(scope)
        scope.clear()
        return copy
    return scope


class TensorNames:
    """The naming half of ``RecorderCore``: ``tensor_new.name``, and the ``final`` prefix of the
    events (see Note [Final events])."""

    # Set by RecorderCore (the torch backend's recorder sets torch's Tensor and Module).
    _files: dict[str, str]  # co_filename -> the name used in src
    _Tensor: Any
    _Module: Any
    _n_tensors: int
    _anchor: FrameType | None
    _anchor_outer: FrameType | None

    def __init__(self) -> None:
        # tensors alive and not yet named, by id()
        self._unnamed: dict[int, TensorEntry] = {}
        self._modules_seen: set[int] = set()  # nn.Modules whose parameters were named
        self._last_scan = (0, 0, 0)  # (frame, line, tensors made) at the last variables scan
        self._statement: Statement = None  # the top-level statement of the last scan
        self._final = 0  # see the ``final`` property
        # see Note [Naming fast paths]: types not to look inside, and those of them not tensors
        self._flat_types: set[type] = set()
        self._plain_types: set[type] = set()
        # id(code object) -> (the code object, its instruction offsets -> lines); see line()
        self._lines: dict[int, tuple[CodeType, dict[int, int]]] = {}

    def statement(self, frame: FrameType | None) -> tuple[Statement, FrameType | None]:
        """The top-level statement running: the outermost recorded frame above ``frame`` (the
        innermost one, from ``where()``) and its line. See Note [Final events]."""
        outer = None
        files, anchor = self._files, self._anchor
        while frame is not None:
            if frame is anchor:
                # The frames below never change: their outermost recorded one was found once.
                # See Note [Recorder fast paths] in _core.py.
                outer = self._anchor_outer or outer
                break
            if frame.f_code.co_filename in files:
                outer = frame
            frame = frame.f_back
        return (None, None) if outer is None else ((id(outer), self.line(outer)), outer)

    def line(self, frame: FrameType) -> int:
        """``frame.f_lineno``, remembered by code object and instruction: see Note [Recorder fast
        paths] in _core.py."""
        lasti = frame.f_lasti
        if lasti < 256:
            return frame.f_lineno  # near the code's start: as quick as the look-up
        code = frame.f_code
        known = self._lines.get(id(code))
        if known is None or known[0] is not code:
            known = self._lines[id(code)] = (code, {})
        lines = known[1]
        line = lines.get(lasti)
        if line is None:
            line = lines[lasti] = frame.f_lineno
        return line

    def _resolve_names(self, frame: FrameType, line: int) -> None:
        """Name tensors after the variables of ``frame`` (a recorded file's) that hold them.

        Called on every event while some tensor is unnamed: an assignment ``y = x.sin()`` binds
        ``y`` after the op's events, so a later event in that frame names it. The first name a
        tensor is seen under wins (a tensor made in a function keeps the name it had there). The
        file's global variables come first, so a model's parameters are named from the model
        variable (``m.blocks.0.net.0.weight``), not from a loop variable inside its methods.
        ``line`` is the frame's current line (``where()`` has just read it).
        """
        # Within one line, a variable can only have been bound to a new tensor if tensors were
        # made since the last scan (``h = blk(h)`` in a one-line loop); skip the other events.
        here = (id(frame), line, self._n_tensors)
        if here == self._last_scan:
            return
        self._last_scan = here
        if frame.f_code.co_flags & CO_OPTIMIZED:
            self._name_from(frame.f_globals)
            if not self._unnamed:
                return
        self._name_from(_locals_of(frame))
        statement, outer = self.statement(frame)
        if statement != self._statement:
            # A top-level statement completed: what it bound is in the outermost frame's variables
            # (when the event is deeper down, they were not scanned), and what it made but left
            # unbound is never named. See Note [Final events].
            self._statement = statement
            if outer is not None and outer is not frame and self._unnamed:
                self._name_from(_locals_of(outer))
            for key, entry in list(self._unnamed.items()):
                if entry.stmt != statement:
                    del self._unnamed[key]

    @property
    def final(self) -> int:
        """How many events are final: those before the oldest tensor_new whose name may still be
        filled in. Read from other threads (an int). See Note [Final events]."""
        return self._final

    # Note [Naming fast paths]
    # ~~~~~~~~~~~~~~~~~~~~~~~~
    # A scan of a scope (``_name_from``) changes something only if one of its values is an
    # unnamed tensor, or a list, tuple or module to look inside (its elements, its parameters).
    # Most scans find neither (the variables of a loop that binds its result a line later, a
    # module's globals full of functions and imports), so before the loop that names, checks
    # made at C speed tell whether it can do anything:
    #
    # - no value's ``id()`` is the key of an unnamed tensor (``_unnamed`` is keyed by ``id()``;
    #   a live object's ``id()`` is unique, so a tensor that is not among the keys is named or
    #   not the recorder's to name);
    # - every value's type is one not to look inside: not a list, a tuple or a module class
    #   (``_flat_types``: the types found so, one ``issubclass`` each the first time it is seen;
    #   a value's type decides what the loop does with it, which holds as long as no object
    #   lies about its class).
    #
    # When both hold the loop would set no name and see no new module: it is skipped. A scope
    # whose values' types are all flat and none a tensor class (``_plain_types``: most module
    # globals) needs no look at the ids. When only the second check fails, the values to look
    # inside are looked into the same way before giving up (a model's layers or parameters
    # kept in a list, in scope at every event of the run): a list or tuple the loop would
    # enter (64 elements at most, not a ``__`` name) whose elements' ids are no unnamed
    # tensor's and whose modules all had their parameters named already (``_modules_seen``),
    # and a module (not ``self``) already seen, change nothing either. Anything else, the
    # loop runs as before. A list whose elements' ids are all in ``_modules_seen`` (a model's
    # layers, in scope at every event) is answered by one set comparison: a live object's
    # ``id()`` is unique, so every module in it was seen, and the rest cannot matter (the
    # ids already showed no unnamed tensor among them).

    def _flat(self, types: set[type]) -> bool:
        """True if none of ``types`` is one to look inside; see Note [Naming fast paths]."""
        flat = self._flat_types
        if types <= flat:
            return True
        nested = False
        for tp in types - flat:
            if tp is list or tp is tuple or issubclass(tp, self._Module):
                nested = True
            else:
                flat.add(tp)
                if not issubclass(tp, self._Tensor):
                    self._plain_types.add(tp)
        return not nested

    def _nothing_to_name(self, scope: dict[str, Any], values: list[Any]) -> bool:
        """True if a scan of ``scope`` (whose values are ``values``) cannot name anything or see a
        new module; see Note [Naming fast paths]."""
        types = set(map(type, values))
        if types <= self._plain_types:
            return True  # no tensor, nothing to look inside
        if not self._unnamed.keys().isdisjoint(map(id, values)):
            return False
        if self._flat(types):
            return True
        flat = self._flat_types
        return all(self._nothing_inside(name, v) for name, v in scope.items() if type(v) not in flat)

    def _nothing_inside(self, name: str, value: Any) -> bool:
        """True if the naming loop would change nothing looking into ``value`` (a list, a tuple or
        a module), the variable ``name``'s value."""
        module, seen = self._Module, self._modules_seen
        if type(value) in (list, tuple):
            if len(value) > 64 or name.startswith("__"):
                return True  # not looked into
            ids = set(map(id, value))
            if not self._unnamed.keys().isdisjoint(ids):
                return False
            # Every element a module already seen (a model's layers) answers at C speed.
            return (
                seen.issuperset(ids)
                or self._flat(set(map(type, value)))
                or all(id(v) in seen for v in value if isinstance(v, module))
            )
        if isinstance(value, module):
            return name == "self" or id(value) in seen
        return True  # a subclass of list or tuple: the loop passes it by

    def _name_from(self, scope: dict[str, Any]) -> None:
        if self._nothing_to_name(scope, list(scope.values())):
            return
        tensor, module, unnamed = self._Tensor, self._Module, self._unnamed
        for name, value in list(scope.items()):
            if isinstance(value, tensor):
                self._set_name(value, name)
            elif type(value) in (list, tuple) and len(value) <= 64 and not name.startswith("__"):
                for i, v in enumerate(value):
                    if isinstance(v, tensor):
                        self._set_name(v, f"{name}[{i}]")
                    elif isinstance(v, module):
                        self._name_parameters(v, f"{name}[{i}]")
            elif isinstance(value, module) and name != "self":
                # Parameters by their path in a model variable: ``model.fc1.weight`` (inside a
                # module's own methods, ``self`` would name them before the model variable does).
                self._name_parameters(value, name)
            if not unnamed:
                return

    def _name_parameters(self, m: Any, prefix: str) -> None:
        if id(m) not in self._modules_seen:
            self._modules_seen.add(id(m))
            for path, p in m.named_parameters():
                self._set_name(p, f"{prefix}.{path}")

    def _set_name(self, t: Any, name: str) -> None:
        entry = self._unnamed.get(id(t))
        if entry is not None and entry.ref is not None and entry.ref() is t and entry.event is not None:
            del self._unnamed[id(t)]
            entry.event["name"] = name

    def name_remaining(self, scope: dict[str, Any]) -> None:
        """At the end: name what is still unnamed from the variables of the recording's caller."""
        self._modules_seen.clear()  # parameters made since a model was first seen
        self._name_from(scope)
