"""How the torch backend sees a real PyTorch program: patches installed for one recording.

Note [What the torch backend patches]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Everything is installed when ``record()`` starts and undone when it ends, also on error
(``Instrumentation.install`` returns the undo). Nothing is patched at import time.

- ``torch.utils.checkpoint``: the module globals its non-reentrant code looks up at call time.
  ``_CheckpointFrame``, ``_checkpoint_hook`` and ``_recomputation_hook`` become subclasses that
  report ``frame_new``, ``pack``/``unpack``/``recomputed_take``/``checkpoint_error``,
  ``recompute_start``/``rpack``/``early_stop``/``recompute_end``; ``checkpoint`` wraps the
  checkpointed function for ``fn_start``/``fn_end`` (its first call is the forward, any later
  one a recomputation); 2.8's ``_NoopSaveInputs`` and 2.13's ``_CheckpointFrame.save_inputs``
  report ``inputs_saved``; ``uuid`` is wrapped so that the temporary gid of an unpack outside
  backward is known before torch draws it. A scenario must call ``checkpoint`` through the
  module (``from torch.utils.checkpoint import checkpoint`` inside the recording, as scenarios do).
- ``torch.autograd.graph.saved_tensors_hooks.__enter__/__exit__``: ``hooks_push``/``hooks_pop``.
- ``torch.autograd.backward`` and ``torch.autograd.grad``: ``backward_start``/``backward_end``.
- A ``TorchFunctionMode`` for the whole recording: the tensors each top-level torch call returns
  (``tensor_new``, ``node_new``), ``op``, ``version_bump`` of in-place calls, and what a node made
  outside checkpoint hooks saved (``saved``, read back from its ``_saved_*`` attributes; under
  checkpoint hooks that would unpack, so there the ``pack`` events are the whole story).
- Each new node gets a pre-hook and a hook: ``node_exec``/``node_exec_end`` (then
  ``grad_accumulate`` for an AccumulateGrad, ``saved_release`` without ``retain_graph``).
  See Note [Torch nodes have no identity] in ``_recorder.py``.

Weak-reference callbacks on tensors, holders and frames (the recorder's own) give
``tensor_free``, ``holder_gc`` and ``frame_gc``.
"""

from __future__ import annotations

import functools
import uuid
import weakref
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from engine.trace.torch_backend._recorder import ACCUMULATE_GRAD, TorchRecorder

# Tensor methods and functions that are no op worth an event (they answer questions).
_QUIET = frozenset(
    {
        "size", "dim", "numel", "stride", "is_contiguous", "is_floating_point", "is_complex",
        "element_size", "data_ptr", "untyped_storage", "storage_offset", "tolist", "item",
        "__repr__", "__format__", "__len__", "__bool__", "__float__", "__int__", "__index__",
        "__hash__", "__reduce_ex__", "__deepcopy__", "_is_view", "get_device", "__array__",
        "register_hook", "retain_grad", "backward", "equal", "allclose", "_version", "ndimension",
        "__iter__", "__contains__", "numpy", "is_leaf", "requires_grad_",
    }
)  # fmt: skip


def _flat_tensors(value: Any, tensor_type: type) -> list[Any]:
    if isinstance(value, tensor_type):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _flat_tensors(v, tensor_type)]
    return []


def _same_tensor(a: Any, b: Any) -> bool:
    return bool(
        a is b
        or (
            a.data_ptr() == b.data_ptr()
            and a.shape == b.shape
            and a.stride() == b.stride()
            and a.dtype == b.dtype
        )
    )


class Instrumentation:
    """The patches of one recording (Note [What the torch backend patches])."""

    def __init__(self, recorder: TorchRecorder, torch: Any, design: str) -> None:
        self.rec = recorder
        self.torch = torch
        self.design = design  # "noop_save_inputs" (2.8) or "frame_inputs" (2.13)
        self.cp = torch.utils.checkpoint
        self.Tensor = torch.Tensor
        self._undo: list[Callable[[], None]] = []
        # Frames whose hooks are not made yet (weakly: a frame of a no-grad call never gets any).
        self._setting_up: list[weakref.ref[Any]] = []
        self._next_uuid: uuid.UUID | None = None
        self._quiet = 0  # > 0 while torch formats a tensor for printing
        # While a new node's saved slots are probed: the (holder, frame) each one unpacks
        # (Note [Which node a pack was for]).
        self._probing: list[tuple[Any, Any]] | None = None
        self._probe_dummy = torch.empty(0)
        self._to_probe: list[tuple[Any, int]] = []  # new nodes made under checkpoint hooks
        recorder.on_new_node = self._hook_node

    def emit(self, kind: str, **fields: Any) -> None:
        self.rec.sink(kind, fields)

    # --- installing -----------------------------------------------------------------------------

    def _set(self, owner: Any, name: str, value: Any) -> None:
        old = getattr(owner, name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, old))

    def install(self) -> Callable[[], None]:
        """Install every patch; returns the function that removes them all."""
        try:
            self._patch_hooks_stack()
            self._patch_checkpoint()
            self._patch_backward()
            self._enter_function_mode()
        except BaseException:
            self.uninstall()
            raise
        return self.uninstall

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    # --- the saved-tensor hooks stack -----------------------------------------------------------

    def _patch_hooks_stack(self) -> None:
        hooks_cls = self.torch.autograd.graph.saved_tensors_hooks
        enter, exit_ = hooks_cls.__enter__, hooks_cls.__exit__
        inst = self

        def traced_enter(hooks: Any) -> None:
            enter(hooks)
            inst.emit("hooks_push", hooks=hooks)

        def traced_exit(hooks: Any, *args: Any) -> None:
            exit_(hooks, *args)
            inst.emit("hooks_pop")

        self._set(hooks_cls, "__enter__", traced_enter)
        self._set(hooks_cls, "__exit__", traced_exit)

    # --- checkpoint -----------------------------------------------------------------------------

    def _patch_checkpoint(self) -> None:
        cp, inst = self.cp, self
        frame_cls = cp._CheckpointFrame
        checkpoint_hook_cls = cp._checkpoint_hook
        recomputation_hook_cls = cp._recomputation_hook
        stop_error = cp._StopRecomputationError
        real_checkpoint = cp.checkpoint
        real_generator = cp._checkpoint_without_reentrant_generator
        labels: list[str] = []

        def generator(fn: Any, *args: Any, **kwargs: Any) -> Any:
            labels.append(getattr(fn, "__name__", type(fn).__name__))
            return real_generator(fn, *args, **kwargs)

        class _CheckpointFrame(frame_cls):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                inst.emit("frame_new", frame=self, label=labels.pop() if labels else "?")
                inst._setting_up.append(weakref.ref(self))

            def save_inputs(self, *args: Any) -> None:  # 2.13: the inputs are kept on the frame
                super().save_inputs(*args)
                tensors = [a for a in args if isinstance(a, inst.Tensor)]
                inst.emit("inputs_saved", frame=self, tensors=tensors, node=None)

        class _checkpoint_hook(checkpoint_hook_cls):  # type: ignore[misc, valid-type]  # noqa: N801
            _trace_kind = "checkpoint"

            def __init__(self, frame: Any) -> None:
                super().__init__(frame)
                self._trace_frame = weakref.ref(frame)
                if inst._setting_up and inst._setting_up[-1]() is frame:
                    inst._setting_up.pop()
                # torch's hooks, wrapped below (getattr: mypy cannot type torch's attributes)
                pack, unpack = getattr(self, "pack_hook"), getattr(self, "unpack_hook")  # noqa: B009

                def pack_hook(x: Any) -> Any:
                    holder = pack(x)
                    inst.emit("pack", frame=frame, index=len(frame.weak_holders) - 1, holder=holder, tensor=x)
                    return holder

                def unpack_hook(holder: Any) -> Any:
                    if inst._probing is not None:  # See Note [Which node a pack was for]
                        inst._probing.append((holder, frame))
                        return inst._probe_dummy
                    gid = inst._unpack_gid()
                    inst.emit("unpack", frame=frame, holder=holder, gid=gid)
                    try:
                        ret = unpack(holder)
                    except stop_error:
                        raise
                    except BaseException as e:
                        inst.emit("checkpoint_error", frame=frame, error=e)
                        raise
                    finally:
                        inst._next_uuid = None
                    inst.emit("recomputed_take", frame=frame, holder=holder, tensor=ret, gid=gid)
                    return ret

                self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

        class _recomputation_hook(recomputation_hook_cls):  # type: ignore[misc, valid-type]  # noqa: N801
            _trace_kind = "recomputation"

            def __init__(self, target_frame_ref: Any, gid: Any) -> None:
                super().__init__(target_frame_ref, gid)
                self._trace_frame, self._trace_gid = target_frame_ref, gid
                pack = getattr(self, "pack_hook")  # noqa: B009

                def pack_hook(x: Any) -> Any:
                    frame = target_frame_ref()
                    index = frame.recomp_counter[gid]
                    total = len(frame.weak_holders)
                    holder = frame.weak_holders[index]() if index < total else None
                    outcome = "extra" if index >= total else "skip" if holder is None else "keep"
                    try:
                        out = pack(x)
                    except stop_error:
                        inst._rpack(frame, index, outcome, holder, x, gid)
                        count = frame.recomp_counter[gid]
                        inst.emit("early_stop", frame=frame, count=count, total=total, gid=gid)
                        raise
                    except BaseException:
                        inst._rpack(frame, index, outcome, holder, x, gid)
                        raise
                    inst._rpack(frame, index, outcome, holder, out, gid)
                    return out

                self.pack_hook = pack_hook

            def __enter__(self) -> None:
                inst.emit("recompute_start", frame=self._trace_frame(), gid=self._trace_gid)
                super().__enter__()

            def __exit__(self, *args: Any) -> None:
                super().__exit__(*args)
                exc_type = args[0] if args else None
                reason = (
                    "completed"
                    if exc_type is None
                    else "early_stop"
                    if issubclass(exc_type, stop_error)
                    else "error"
                )
                inst.emit("recompute_end", frame=self._trace_frame(), reason=reason, gid=self._trace_gid)

        @functools.wraps(real_checkpoint)
        def checkpoint(function: Any, *args: Any, use_reentrant: Any = None, **kwargs: Any) -> Any:
            if use_reentrant is False:
                function = inst._traced_function(function, stop_error)
            return real_checkpoint(function, *args, use_reentrant=use_reentrant, **kwargs)

        self._set(cp, "_checkpoint_without_reentrant_generator", generator)
        self._set(cp, "_CheckpointFrame", _CheckpointFrame)
        self._set(cp, "_checkpoint_hook", _checkpoint_hook)
        self._set(cp, "_recomputation_hook", _recomputation_hook)
        self._set(cp, "checkpoint", checkpoint)
        self._set(cp, "uuid", SimpleNamespace(uuid4=self._uuid4))
        if self.design == "noop_save_inputs":
            self._set(cp, "_NoopSaveInputs", self._input_saver(cp._NoopSaveInputs))

    def _uuid4(self) -> uuid.UUID:
        u, self._next_uuid = self._next_uuid, None
        return u if u is not None else uuid.uuid4()

    def _unpack_gid(self) -> Any:
        """The gid torch's unpack hook is about to compute (a temporary one is drawn now)."""
        group_cls = getattr(self.cp, "GraphExecGroup", None)
        if group_cls is not None:
            group = group_cls._get_current_group()
            if group is not None:
                return group
        gid = int(self.torch._C._current_graph_task_id())
        if gid == -1:
            self._next_uuid = uuid.uuid4()
            gid = int(self._next_uuid)
        return gid

    def _rpack(self, frame: Any, index: int, outcome: str, holder: Any, x: Any, gid: Any) -> None:
        if outcome == "keep":
            handle = holder.handles.get(gid)
            x = frame.recomputed[gid].get(handle, x) if handle is not None else x
        elif x.requires_grad:
            x = x.detach()  # what torch's hook passes on
        self.emit("rpack", frame=frame, index=index, outcome=outcome, holder=holder, tensor=x, gid=gid)

    def _input_saver(self, noop: Any) -> Any:
        """2.8's ``_NoopSaveInputs``, reporting ``inputs_saved`` once ``apply`` has saved them."""
        inst = self

        class InputSaver:
            @staticmethod
            def apply(dummy: Any, kwargs: Any, *args: Any) -> Any:
                out = noop.apply(dummy, kwargs, *args)
                frame = inst._setting_up[-1]() if inst._setting_up else None
                tensors = [dummy, *(a for a in args if isinstance(a, inst.Tensor))]
                inst.emit("inputs_saved", frame=frame, tensors=tensors, node=out.grad_fn)
                inst._packs_done()
                return out

        return InputSaver

    def _traced_function(self, fn: Any, stop_error: type[BaseException]) -> Any:
        """``fn`` between ``fn_start`` and ``fn_end``: its first call is the checkpoint's forward,
        the later ones are recomputations."""
        inst = self
        calls = [0]

        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            mode = "forward" if calls[0] == 0 else "recompute"
            calls[0] += 1
            inst.emit("fn_start", mode=mode)
            try:
                out = fn(*args, **kwargs)
            except stop_error:
                inst.emit("fn_end", outcome="early_stop")
                raise
            except BaseException as e:
                inst.emit("fn_end", outcome="raised", error=type(e).__name__)
                raise
            inst.emit("fn_end", outcome="returned")
            return out

        # The frame's label is the function's name; a module has none, its class names it.
        traced.__name__ = getattr(fn, "__name__", type(fn).__name__)
        return traced

    # --- backward calls -------------------------------------------------------------------------

    def _patch_backward(self) -> None:
        autograd, inst = self.torch.autograd, self
        real_backward, real_grad = autograd.backward, autograd.grad

        def roots_of(tensors: Any) -> list[Any]:
            return _flat_tensors(tensors, inst.Tensor)

        @functools.wraps(real_backward)
        def backward(
            tensors: Any,
            grad_tensors: Any = None,
            retain_graph: Any = None,
            create_graph: bool = False,
            grad_variables: Any = None,
            inputs: Any = None,
        ) -> Any:
            retain = create_graph if retain_graph is None else retain_graph
            inst.emit("t_backward_start", api="backward", roots=roots_of(tensors), inputs=roots_of(inputs),
                      retain_graph=retain, create_graph=create_graph)  # fmt: skip
            failed = True
            try:
                out = real_backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)
                failed = False
                return out
            finally:
                inst.emit("t_backward_end", error=failed)

        @functools.wraps(real_grad)
        def grad(outputs: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            create_graph = bool(kwargs.get("create_graph", args[2] if len(args) > 2 else False))
            retain_graph = kwargs.get("retain_graph", args[1] if len(args) > 1 else None)
            retain = create_graph if retain_graph is None else retain_graph
            inst.emit("t_backward_start", api="grad", roots=roots_of(outputs), inputs=roots_of(inputs),
                      retain_graph=retain, create_graph=create_graph)  # fmt: skip
            failed = True
            try:
                out = real_grad(outputs, inputs, *args, **kwargs)
                failed = False
                return out
            finally:
                inst.emit("t_backward_end", error=failed)

        self._set(autograd, "backward", backward)
        self._set(autograd, "grad", grad)
        # ``Tensor.backward`` and ``autograd.grad`` first offer themselves to torch-function
        # modes; the function mode would then run the whole backward inside its handler, where
        # it is off, and miss what the backward runs (recomputations). For plain tensors they
        # skip that offer while recording (what they call inside is still seen).
        plain = (self.Tensor, self.torch.nn.Parameter)
        unary = self.torch._tensor.has_torch_function_unary
        variadic = autograd.has_torch_function

        def has_torch_function_unary(t: Any) -> bool:
            return type(t) not in plain and bool(unary(t))

        def has_torch_function(args: Any) -> bool:
            return any(type(t) not in plain for t in args) and bool(variadic(args))

        self._set(self.torch._tensor, "has_torch_function_unary", has_torch_function_unary)
        self._set(autograd, "has_torch_function", has_torch_function)

    # --- nodes ----------------------------------------------------------------------------------

    def _hook_node(self, node: Any, nid: int) -> None:
        """Hooks that hold only the node's trace id (Note [Torch nodes have no identity])."""
        emit, current_task = self.emit, self.torch._C._current_graph_task_id
        variable = weakref.ref(node.variable) if node.name() == ACCUMULATE_GRAD else None

        def pre_hook(grad_outputs: Any) -> None:
            emit("t_node_exec", nid=nid, task=int(current_task()))

        def post_hook(grad_inputs: Any, grad_outputs: Any) -> None:
            v = variable() if variable is not None else None
            emit("t_node_exec_end", nid=nid, grads=list(grad_inputs), variable=v)

        node.register_prehook(pre_hook)
        node.register_hook(post_hook)
        if self.rec.hooks and self.rec.hooks[-1]["hooks"] == "checkpoint":
            # Probed once the call has returned: a node can be met while it is still saving
            # (its output's tensor_new, from that output's own pack).
            self._to_probe.append((node, nid))

    def _packs_done(self) -> None:
        """A call has returned: name the node and slot of its packs, release the rest."""
        to_probe, self._to_probe = self._to_probe, []
        if self.rec.pending_packs:
            for node, nid in to_probe:
                self._attribute_packs(node, nid)
        self.emit("t_packs_done")

    def _attribute_packs(self, node: Any, nid: int) -> None:
        """Which of the checkpoint's holders ``node`` saved, in which slot.

        Note [Which node a pack was for]
        ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
        torch calls the pack hook while an op builds its node, before the node is reachable from
        Python, so a ``pack`` is recorded with ``node``/``slot`` null, and no ``saved`` follows it.
        Once the call has returned, each new node made under the checkpoint's hooks is probed:
        every ``_saved_<slot>`` (``saved_tensors`` for a custom Function's node) is read with
        ``_probing`` set, so the checkpoint's unpack hook, instead of unpacking (which would
        recompute), notes the holder it was handed and returns an empty tensor. That names the
        node and slot of each pack: the recorder emits the ``saved`` events the engine emits after
        its packs (``packed: "holder"``), and the holder's later events (``unpack``) carry them.
        The pack itself stays as it was (its node's ``node_new`` comes after it). Only under the
        checkpoint's own hooks: a user's unpack hooks must not run.
        """
        found: list[tuple[str, Any, Any]] = []
        self._probing = []
        try:
            for attr in dir(node):
                if attr != "saved_tensors" and not attr.startswith("_saved_"):
                    continue
                before = len(self._probing)
                try:
                    value = getattr(node, attr)
                except RuntimeError:  # freed, or nothing saved
                    continue
                name = attr.removeprefix("_saved_")
                probed = self._probing[before:]
                listed = isinstance(value, list | tuple)
                for i, (holder, frame) in enumerate(probed):
                    found.append((f"{name}[{i}]" if listed else name, holder, frame))
        finally:
            self._probing = None
        if found:
            self.emit("t_pack_node", nid=nid, slots=found)

    # --- ops ------------------------------------------------------------------------------------

    def _enter_function_mode(self) -> None:
        from torch.overrides import TorchFunctionMode

        inst = self

        class TraceMode(TorchFunctionMode):  # type: ignore[misc]
            def __torch_function__(
                self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
            ) -> Any:
                out = func(*args, **(kwargs or {}))
                inst._after_call(func, args, kwargs or {}, out)
                return out

        mode = TraceMode()
        mode.__enter__()
        self._undo.append(lambda: mode.__exit__(None, None, None))

        # Printing a tensor runs dozens of ops to format it: none of them is the program's.
        tensor_str = self.torch._tensor_str
        real_str = tensor_str._str

        @functools.wraps(real_str)
        def quiet_str(*args: Any, **kwargs: Any) -> Any:
            self._quiet += 1
            try:
                return real_str(*args, **kwargs)
            finally:
                self._quiet -= 1

        self._set(tensor_str, "_str", quiet_str)

    def _after_call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        if self._quiet or self._probing is not None:  # probing runs ops of its own: not the program's
            return
        name = getattr(func, "__name__", "")
        if name in ("__get__", "__set__", "__delete__") or name in _QUIET:
            return
        outputs = _flat_tensors(out, self.Tensor)
        inputs = [a for a in args if isinstance(a, self.Tensor | bool | int | float)]
        if not outputs and not any(isinstance(a, self.Tensor) for a in inputs):
            return
        rec = self.rec
        first = rec._n_nodes  # nodes numbered from here on were made by this call
        for t in outputs:
            rec.register(t)
        if name.endswith("_") and not name.endswith("__") and args and isinstance(args[0], self.Tensor):
            self.emit("version_bump", tensor=args[0])
        node = outputs[0].grad_fn if outputs else None
        self.emit("op", name=name, inputs=inputs, outputs=outputs, node=node)
        if node is not None and not rec.hooks:
            seen = [*outputs, *(a for a in args if isinstance(a, self.Tensor))]
            # A composite call (``linear`` on a 3-d input: view, mm, view) makes several nodes; what
            # each inner one saved is reported too, the output's node first.
            for made in self._nodes_made(node, first):
                self._report_saved(made, seen)
        self._packs_done()

    def _nodes_made(self, node: Any, first: int) -> list[Any]:
        """``node`` and the nodes behind it numbered ``first`` or later: those one call made."""
        out, todo, visited = [], [node], set()
        while todo:
            n = todo.pop(0)
            if n is None or id(n) in visited:
                continue
            visited.add(id(n))
            entry = self.rec.node_entry(n)
            if entry is None or entry.nid < first:
                continue
            out.append(n)
            todo.extend(nxt for nxt, _ in n.next_functions)
        return out

    def _report_saved(self, node: Any, seen: list[Any]) -> None:
        """A node made outside checkpoint hooks: what it saved (once per node). A saved output
        comes back from ``_saved_result`` as a new tensor object: it is reported as the tensor
        the call returned (``seen``), which it is."""
        entry = self.rec.node_entry(node)
        if entry is None or entry.was_saved:
            return
        saved = []
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    value = getattr(node, attr)
                except RuntimeError:  # already freed
                    continue
                if isinstance(value, self.Tensor):
                    same = (t for t in seen if _same_tensor(t, value))
                    saved.append((attr[len("_saved_") :], next(same, value)))
        if saved:
            self.emit("t_saved", nid=entry.nid, saved=saved)
