"""The backward engine: ``GraphTask``, the ready queue, and ``Engine.execute``.

This follows ``torch/csrc/autograd/engine.cpp`` for the CPU: the backward runs on the calling
thread; a backward started from inside a backward (a hook, a node, a checkpoint's recomputation)
is a new GraphTask with a higher re-entrant depth that shares this thread's ready queue.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from engine._C import _tls
from engine._tensor import Tensor
from engine._warnings import warn_once
from engine.autograd.graph import AccumulateGrad, Edge, InputMetadata, Node, _anomaly_enabled
from engine.trace import emit

__all__ = ["Engine", "GraphTask", "current_graph_task"]

CREATE_GRAPH_CYCLE_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter and "
    "its gradient which can cause a memory leak. We recommend using autograd.grad when creating the graph "
    "to avoid this. If you have to use this function, make sure to reset the .grad fields of your "
    "parameters to None after use to break the cycle and avoid the leak."
)

# PyTorch numbers graph tasks with one process-wide counter.
_graph_task_ids = itertools.count()


class ExecInfo:
    """Per-node plan of a backward that only needs some inputs (``grad()`` / ``inputs=``)."""

    __slots__ = ("captures", "needed")

    def __init__(self) -> None:
        self.needed = False
        # (index into the node's incoming grads, index into GraphTask.captured_vars)
        self.captures: list[tuple[int, int]] = []

    def should_execute(self) -> bool:
        return self.needed or bool(self.captures)


class GraphTask:
    """Everything one call of ``backward()`` / ``grad()`` needs while it runs."""

    def __init__(self, keep_graph: bool, create_graph: bool, reentrant_depth: int) -> None:
        self.id = next(_graph_task_ids)
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.reentrant_depth = reentrant_depth
        # Note [Dependency counting]
        # ~~~~~~~~~~~~~~~~~~~~~~~~~~
        # dependencies[node] counts the edges into node from nodes this task will run. A node
        # is ready when the count reaches 0: only then has every gradient flowing into it been
        # summed into its input buffer (not_ready[node]).
        self.dependencies: dict[Node, int] = {}
        self.not_ready: dict[Node, list[Tensor | None]] = {}
        self.exec_info: dict[Node, ExecInfo] = {}
        self.captured_vars: list[Tensor | None] = []
        self.outstanding_tasks = 0
        self.final_callbacks: list[Callable[[], None]] = []
        self.completed = False
        self.has_error = False
        self.nodes_in_graph: set[Node] = set()
        # See Note [Saved-tensor hooks in backward].
        self.saved_tensors_hooks = list(_tls.saved_tensors_hooks)
        self.saved_tensors_hooks_disabled = _tls.saved_tensors_hooks_disabled


def current_graph_task() -> GraphTask | None:
    return _tls.graph_task


class ReadyQueue:
    """PyTorch's CPU ready queue: a ``std::priority_queue`` of node tasks.

    Higher re-entrant depth first, then higher ``sequence_nr`` first. Ties (several
    AccumulateGrad nodes, which all have sequence_nr UINT64_MAX) are broken the way libstdc++'s
    binary heap breaks them, which is what makes the order of ``.grad`` accumulation match torch.
    """

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, GraphTask, Node, list[Tensor | None]]] = []

    @staticmethod
    def _less(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
        # CompareNodeTaskTime: "a runs after b"
        if a[0] == b[0]:
            return bool(a[1] < b[1])
        return bool(a[0] < b[0])

    def push(self, task: GraphTask, node: Node, buffer: list[Tensor | None]) -> None:
        task.outstanding_tasks += 1
        heap = self.heap
        heap.append((task.reentrant_depth, node._seq_nr, task, node, buffer))
        if len(heap) == 1:
            return  # the only entry is the heap (a chain's backward: one ready node at a time)
        # std::__push_heap
        hole = len(heap) - 1
        value = heap[hole]
        parent = (hole - 1) // 2
        while hole > 0 and self._less(heap[parent], value):
            heap[hole] = heap[parent]
            hole = parent
            parent = (hole - 1) // 2
        heap[hole] = value

    def pop(self) -> tuple[GraphTask, Node, list[Tensor | None]]:
        heap = self.heap
        top = heap[0]
        last = heap.pop()
        if heap:
            # std::__pop_heap then std::__adjust_heap: sift the hole to a leaf, then push up.
            n = len(heap)
            hole = 0
            child = 0
            while child < (n - 1) // 2:
                child = 2 * (child + 1)
                if self._less(heap[child], heap[child - 1]):
                    child -= 1
                heap[hole] = heap[child]
                hole = child
            if n % 2 == 0 and child == (n - 2) // 2:
                child = 2 * (child + 1)
                heap[hole] = heap[child - 1]
                hole = child - 1
            parent = (hole - 1) // 2
            while hole > 0 and self._less(heap[parent], last):
                heap[hole] = heap[parent]
                hole = parent
                parent = (hole - 1) // 2
            heap[hole] = last
        return top[2], top[3], top[4]

    def __len__(self) -> int:
        return len(self.heap)


class GraphRoot(Node):
    """The node a backward with several roots starts from; it hands out their gradients."""

    _node_name = "GraphRoot"

    def __init__(self, edges: list[Edge], grads: list[Tensor | None]) -> None:
        super().__init__()
        self._next_edges = edges
        self.outputs = grads
        if emit.enabled:
            emit.emit("node_new", node=self)

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        return list(self.outputs)


class Engine:
    """The singleton that runs backward graphs (``Variable._execution_engine``)."""

    def queue_callback(self, callback: Callable[[], None]) -> None:
        task = _tls.graph_task
        if task is None:
            raise RuntimeError("Final callbacks can only be installed during backward pass.")
        task.final_callbacks.append(callback)

    def execute(
        self,
        roots: Sequence[Edge],
        grads: Sequence[Tensor | None],
        keep_graph: bool,
        create_graph: bool,
        accumulate_grad: bool,
        outputs: Sequence[Edge] = (),
    ) -> list[Tensor | None]:
        """Run backward from ``roots``. With ``outputs`` (``grad()``/``inputs=``), only the part
        of the graph leading to them runs, and their gradients are captured and returned."""
        grads = validate_outputs(roots, list(grads))
        if create_graph and accumulate_grad:
            # PyTorch's TORCH_WARN_ONCE: once per process, every time with set_warn_always(True).
            warn_once("create_graph_cycle", CREATE_GRAPH_CYCLE_WARNING, UserWarning, stacklevel=4)
        outer = _tls.graph_task
        depth = 0 if outer is None else outer.reentrant_depth + 1
        task = GraphTask(keep_graph, create_graph, depth)
        if emit.enabled:
            emit.emit(
                "backward_start", task=task, roots=roots, inputs=outputs, accumulate_grad=accumulate_grad
            )
        if len(roots) == 1:
            graph_root: Node = roots[0][0]  # type: ignore[assignment]
            root_buffer: list[Tensor | None] = [None] * graph_root.num_inputs()
            _buffer_add(root_buffer, roots[0][1], grads[0])
        else:
            graph_root = GraphRoot(list(roots), list(grads))
            root_buffer = []
        compute_dependencies(task, graph_root)
        if outputs:
            init_to_execute(task, graph_root, outputs, accumulate_grad)
        if _tls.ready_queue is None:
            _tls.ready_queue = ReadyQueue()
        queue: ReadyQueue = _tls.ready_queue
        queue.push(task, graph_root, root_buffer)
        _tls.reentrant_depth = depth
        try:
            if outer is None:
                thread_main(task, queue)
            elif _reentrant.current_depth >= MAX_DEPTH or _stack_nearly_full():
                # See Note [Deep re-entrant backward].
                _thread_main_on_new_thread(task, queue)
            else:
                _reentrant.current_depth += 1
                try:
                    thread_main(task, queue)
                finally:
                    _reentrant.current_depth -= 1
        finally:
            _tls.reentrant_depth = 0 if outer is None else outer.reentrant_depth
            if emit.enabled:
                emit.emit("backward_end", task=task)
        return task.captured_vars


# Note [Deep re-entrant backward]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A backward started from inside a backward (a custom Function's backward calling backward(), a
# hook, reentrant checkpoint) runs nested on the calling thread: each level costs about ten Python
# frames, so a few thousand levels would hit Python's recursion limit. PyTorch bounds the nesting
# per thread the same way for its C++ stack (engine.cpp: ``MAX_DEPTH = 60``, ``current_depth``):
# the 61st nested backward on a thread is handed to another thread, and the calling thread blocks
# until it is done; that thread nests up to MAX_DEPTH again, and so on (3000 levels: 50 threads,
# in torch 2.8 as here). The graph task still shares the caller's ready queue and has the same
# re-entrant depth, so nodes run in exactly the same order; only the thread differs. The new
# thread starts with a copy of the caller's thread-local state (grad mode, saved-tensor hooks,
# dispatch modes, the sequence_nr counter, which is copied back when it ends), as PyTorch's
# GraphTask carries its ThreadLocalState; an exception is re-raised on the calling thread.
# Python frames are not C++ frames: the switch also happens, before MAX_DEPTH, when this thread's
# Python stack is within _STACK_MARGIN frames of the recursion limit. Shallow nesting (< 60
# levels, every case of the trace tests) never leaves the thread. The trace recorder only records
# its own thread: events of a backward nested beyond MAX_DEPTH are not recorded.
MAX_DEPTH = 60
_STACK_MARGIN = 250
# Threads running a deep re-entrant backward get a large C stack: every Python call made through
# C (a node's __call__, a property, a context manager) also uses the C stack.
_REENTRANT_THREAD_STACK_SIZE = 256 * 1024 * 1024
_stack_size_lock = threading.Lock()


class _ReentrantState(threading.local):
    def __init__(self) -> None:
        # PyTorch's thread-local ``current_depth``: nested backward calls running on this thread.
        self.current_depth = 0


_reentrant = _ReentrantState()


def _stack_nearly_full() -> bool:
    limit = sys.getrecursionlimit() - _STACK_MARGIN
    frame = sys._getframe()
    n = 0
    while frame is not None:
        n += 1
        if n > limit:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _thread_main_on_new_thread(task: GraphTask, queue: ReadyQueue) -> None:
    """Run ``task`` on a new thread and wait for it (PyTorch's ``add_thread_pool_task``)."""
    state = {k: list(v) if isinstance(v, list) else v for k, v in vars(_tls).items()}
    error: list[BaseException] = []
    after: dict[str, int] = {}

    def run() -> None:
        for k, v in state.items():
            setattr(_tls, k, v)
        try:
            thread_main(task, queue)
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            error.append(e)
        finally:
            after["sequence_nr"] = _tls.sequence_nr

    with _stack_size_lock:
        previous = threading.stack_size(_REENTRANT_THREAD_STACK_SIZE)
        try:
            worker = threading.Thread(target=run, name="engine-reentrant-backward", daemon=True)
            worker.start()
        finally:
            threading.stack_size(previous)
    worker.join()
    _tls.sequence_nr = after.get("sequence_nr", _tls.sequence_nr)
    if error:
        raise error[0]


def compute_dependencies(task: GraphTask, root: Node) -> None:
    seen = task.nodes_in_graph
    seen.add(root)
    stack = [root]
    deps = task.dependencies
    while stack:
        fn = stack.pop()
        for nxt, _ in fn._next_edges:
            if nxt is None:
                continue
            deps[nxt] = deps.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)


# Note [Partial backward: exec_info and captures]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# With ``grad(outputs, inputs)`` or ``backward(inputs=...)`` only part of the graph runs. Each
# input names an edge (node, input_nr). ``backward(inputs=...)`` marks those nodes "needed" (they
# run, so AccumulateGrad accumulates); ``grad()`` instead adds a "capture": the gradient arriving
# at that slot is copied into the result and the node itself does not run. A node is needed iff
# some path leads from it to a needed or capturing node; nodes that are not needed never get a
# buffer, so their hooks do not run and their saved tensors are not freed. The root is not
# special: ``grad(x, x)`` captures at x's AccumulateGrad without running it. A captured value is
# the gradient after the slot's tensor hooks when the node does not run, and the raw buffer when
# it also runs (its tensor hooks then run once, as part of the node, in call_function).


def init_to_execute(task: GraphTask, root: Node, outputs: Sequence[Edge], accumulate_grad: bool) -> None:
    """Mark the nodes on a path from ``root`` to an output; plan the captures of ``grad()``."""
    info = task.exec_info
    for output_idx, (fn, input_nr) in enumerate(outputs):
        if fn is None:
            continue
        entry = info.setdefault(fn, ExecInfo())
        if accumulate_grad:
            entry.needed = True
        else:
            entry.captures.append((input_nr, output_idx))
    task.captured_vars = [None] * len(outputs)
    # Depth-first from the root: a node is needed if one of its children is.
    stack: list[tuple[Node, int]] = [(root, 0)]
    visited = {root}
    while stack:
        fn, i = stack[-1]
        edges = fn._next_edges
        if i < len(edges):
            stack[-1] = (fn, i + 1)
            child = edges[i][0]
            if child is None:
                continue
            if child in visited:
                child_info = info.get(child)
                if child_info is not None and child_info.should_execute():
                    info.setdefault(fn, ExecInfo()).needed = True
                continue
            visited.add(child)
            stack.append((child, 0))
        else:
            stack.pop()
            fn_info = info.get(fn)
            if stack and fn_info is not None and fn_info.should_execute():
                parent = stack[-1][0]
                info.setdefault(parent, ExecInfo()).needed = True
    # The root runs only if it leads to an output (or is one, with backward(inputs=...)): grad(x, x)
    # captures the root AccumulateGrad's input without running it, so x.grad stays untouched.
    info.setdefault(root, ExecInfo())


# Note [Grad mode in backward]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Everything the engine runs for a graph task (tensor hooks, node pre/post hooks, the nodes,
# AccumulateGrad and its post-accumulate hooks, and the final callbacks) runs with grad mode set
# to the task's ``create_graph``, whatever the mode was where backward() was called: PyTorch's
# GraphTask stores grad_mode=create_graph in the thread-local state it restores around each node.
# So a hook of a plain backward() sees ``is_grad_enabled() == False`` and builds no graph.


# Note [Saved-tensor hooks in backward]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A GraphTask copies the saved-tensor hooks stack (and disable_saved_tensors_hooks' message) when
# it is created, and every node it runs starts from a fresh copy of that state, which is put back
# to the caller's once the node is done: PyTorch's GraphTask carries them in its ThreadLocalState
# and the engine restores it around each node (ThreadLocalStateGuard). So a hook that enters or
# exits a saved_tensors_hooks context during backward (without its pair) changes nothing outside
# that node: the caller's stack neither loses an entry nor keeps the hook alive.


def thread_main(task: GraphTask, queue: ReadyQueue) -> None:
    # See Note [Thread-local state around nodes].
    caller = (
        _tls.graph_task,
        _tls.grad_enabled,
        _tls.current_node,
        _tls.saved_tensors_hooks,
        _tls.saved_tensors_hooks_disabled,
    )
    tls = _tls.__dict__  # this thread's: See Note [Reading the thread-local state once] in _C.py
    try:
        while not task.completed:
            if not queue.heap:
                raise RuntimeError("engine: ready queue empty before the graph task completed")
            node_task, node, buffer = queue.pop()
            if node_task.has_error:
                # Left behind by a backward that failed (PyTorch skips them as they come up rather
                # than removing them, which keeps the heap, and so the order of the rest, intact).
                continue
            tls["graph_task"], tls["current_node"] = node_task, node
            # See Note [Grad mode in backward] and Note [Saved-tensor hooks in backward].
            tls["grad_enabled"] = node_task.create_graph
            tls["saved_tensors_hooks"] = list(node_task.saved_tensors_hooks)
            tls["saved_tensors_hooks_disabled"] = node_task.saved_tensors_hooks_disabled
            try:
                evaluate_function(node_task, node, buffer, queue)
            except BaseException as e:
                _restore_tls(caller)
                node_task.has_error = True
                node_task.completed = True
                if _anomaly_enabled[0] and not getattr(e, "_anomaly_reported", False):
                    from engine.autograd.anomaly_mode import report_failure

                    report_failure(node, e)
                raise
            node_task.outstanding_tasks -= 1
            if node_task.outstanding_tasks == 0:
                _restore_tls(caller)
                _finish(node_task)
    finally:
        _restore_tls(caller)


# Note [Thread-local state around nodes]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Each node runs with its task's state (graph task, current node, grad mode, a fresh copy of the
# saved-tensor hooks stack), set right before it runs, whatever the node before it left behind;
# the caller's state is back whenever anything else runs: the final callbacks (``_finish``), an
# error leaving the loop, and the return. Nothing runs between two nodes but the queue's own
# bookkeeping, which reads no thread-local state, so the caller's state is read once per
# backward and put back at those points, rather than saved and restored around every node.


def _restore_tls(state: tuple[Any, ...]) -> None:
    (
        _tls.graph_task,
        _tls.grad_enabled,
        _tls.current_node,
        _tls.saved_tensors_hooks,
        _tls.saved_tensors_hooks_disabled,
    ) = state


def _finish(task: GraphTask) -> None:
    prev, prev_grad_mode = _tls.graph_task, _tls.grad_enabled
    _tls.graph_task = task
    _tls.grad_enabled = task.create_graph
    try:
        # Callbacks may queue more callbacks.
        i = 0
        while i < len(task.final_callbacks):
            task.final_callbacks[i]()
            i += 1
    finally:
        _tls.graph_task, _tls.grad_enabled = prev, prev_grad_mode
        task.completed = True


def evaluate_function(task: GraphTask, fn: Node, buffer: list[Tensor | None], queue: ReadyQueue) -> None:
    if task.exec_info:
        info = task.exec_info.get(fn)
        assert info is not None
        inputs = buffer
        if not info.needed:
            # See Note [Partial backward: exec_info and captures]: tensor hooks run exactly once.
            inputs = call_tensor_pre_hooks(fn, buffer)
        for input_idx, output_idx in info.captures:
            task.captured_vars[output_idx] = inputs[input_idx]
        if not info.needed:
            return
    if emit.enabled:
        emit.emit("node_exec", node=fn)
    outputs = call_function(task, fn, buffer)
    if emit.enabled:
        emit.emit("node_exec_end", node=fn, grads=outputs)
    if not task.keep_graph:
        if emit.enabled:
            # Before the release: the holders and tensors it frees die right after this event.
            emit.emit("saved_release", node=fn)
        fn.release_variables()
    if not outputs:
        return
    if _anomaly_enabled[0]:
        from engine.autograd.anomaly_mode import check_nan

        check_nan(fn, outputs)
    deps, not_ready_buffers, exec_info = task.dependencies, task.not_ready, task.exec_info
    for i, (nxt, input_nr) in enumerate(fn._next_edges):
        if nxt is None:
            continue
        count = deps[nxt] - 1
        is_ready = count == 0
        if is_ready:
            del deps[nxt]
        else:
            deps[nxt] = count
        not_ready = not_ready_buffers.get(nxt)
        if not_ready is None:
            if exec_info:
                nxt_info = exec_info.get(nxt)
                if nxt_info is None or not nxt_info.should_execute():
                    continue
            nb: list[Tensor | None] = [None] * len(nxt._input_metadata)  # nxt.num_inputs()
            nb[input_nr] = outputs[i]  # _buffer_add into an empty buffer
            if is_ready:
                queue.push(task, nxt, nb)
            else:
                task.not_ready[nxt] = nb
        else:
            _buffer_add(not_ready, input_nr, outputs[i])
            if is_ready:
                del task.not_ready[nxt]
                queue.push(task, nxt, not_ready)


def _buffer_add(buffer: list[Tensor | None], pos: int, grad: Tensor | None) -> None:
    """InputBuffer::add: gradients arriving at the same input are summed."""
    if grad is None:
        return
    old = buffer[pos]
    buffer[pos] = grad if old is None else old + grad


# Note [Hook results]
# ~~~~~~~~~~~~~~~~~~~
# Every Python hook the engine calls may return None (keep the value) or a replacement, checked
# the way PyTorch's python_hook.cpp checks it: a tensor hook must return a tensor of the same
# dtype and shape; node pre-hooks and post-hooks must return a tuple of the same length, and a
# None gradient cannot be replaced by a tensor. Hooks on the same value run in registration
# order, each seeing what the previous one returned. Tensor hooks are called even when the
# gradient is None (an output of a multi-output node that received no gradient).


def call_tensor_pre_hooks(fn: Node, inputs: list[Tensor | None]) -> list[Tensor | None]:
    for output_nr, hooks in list(fn._tensor_pre_hooks):
        value = inputs[output_nr]
        modified = False
        for hook in list(hooks.values()):
            result = hook(value)
            if result is None or result is value:
                continue
            _check_single_result(value, result, hook)
            value = result
            modified = True
        if modified:
            inputs = list(inputs)
            inputs[output_nr] = value
    for output_nr, retains_grad_hook in list(fn._retains_grad_hooks.items()):
        inputs = retains_grad_hook(inputs, output_nr)
    return inputs


def call_pre_hooks(fn: Node, inputs: list[Tensor | None]) -> list[Tensor | None]:
    values = tuple(inputs)
    for hook in list(fn._pre_hooks.values()):
        result = hook(values)
        if result is None or result is values:
            continue
        _check_result(values, result, hook)
        values = result
    return list(values)


def call_post_hooks(
    fn: Node, outputs: list[Tensor | None], inputs: list[Tensor | None]
) -> list[Tensor | None]:
    values, grad_outputs = tuple(outputs), tuple(inputs)
    for hook in list(fn._post_hooks.values()):
        result = hook(values, grad_outputs)
        if result is None or result is values:
            continue
        _check_result(values, result, hook)
        values = result
    return list(values)


def call_function(task: GraphTask, fn: Node, inputs: list[Tensor | None]) -> list[Tensor | None]:
    buffer = inputs
    # See Note [No hooks, no hook calls].
    if fn._tensor_pre_hooks or fn._retains_grad_hooks:
        inputs = call_tensor_pre_hooks(fn, inputs)
    if fn._pre_hooks:
        inputs = call_pre_hooks(fn, inputs)
    if not task.keep_graph:
        fn.will_release_variables()
    args = list(inputs)
    if isinstance(fn, AccumulateGrad) and args[0] is not None:
        # See Note [AccumulateGrad steals the gradient]. The engine's own holders: args, inputs
        # (a new list when the pre-hooks ran), the buffer (unless a hook replaced the gradient),
        # this local and getrefcount's argument.
        g = args[0]
        expected = 3 + (inputs is not buffer and inputs[0] is g) + (buffer[0] is g)
        fn._steal_ok = sys.getrefcount(g) == expected
        del g
    outputs = fn._apply(args)
    del args
    outputs = validate_outputs(fn._next_edges, outputs, fn)
    if fn._post_hooks:
        outputs = call_post_hooks(fn, outputs, inputs)
    return outputs


# Note [No hooks, no hook calls]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Almost no node has hooks, and each hook caller copies what it iterates (a hook may remove
# itself) and rebuilds the gradients as a tuple and back. So call_function tests the node's hook
# containers first and calls a caller only when one is non-empty: the callers return their input
# list itself when nothing ran, so skipping them changes nothing, only the copies are saved. The
# containers are the node's own (``_tensor_pre_hooks`` is AccumulateGrad's property reading its
# leaf, an empty list without hooks), so the test sees a hook registered by an earlier hook.


def _hook_name(hook: Any) -> str:
    return str(getattr(hook, "__name__", "<unknown>"))


def _check_result(prev: tuple[Any, ...], result: Any, hook: Any) -> None:
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(prev) != len(result):
        raise RuntimeError(
            f"hook '{_hook_name(hook)}' has returned an incorrect number of values (got "
            f"{len(result)}, but expected {len(prev)})"
        )
    for old, new in zip(prev, result, strict=True):
        _check_single_result(old, new, hook)


def _check_single_result(original: Any, result: Any, hook: Any) -> None:
    if result is None:
        return
    if original is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
    if result._dtype is not original._dtype:
        raise RuntimeError(
            f"hook '{_hook_name(hook)}' has changed the type of value (was "
            f"{_type_string(original)} got {_type_string(result)})"
        )
    if result._data.shape != original._data.shape:
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the size of value")


def _type_string(t: Tensor) -> str:
    # at::Tensor::toString(): the legacy type name, e.g. "engine.FloatTensor".
    return f"engine.{t._dtype._legacy_name}"


def validate_outputs(
    edges: Sequence[Edge], grads: list[Tensor | None], producer: Node | None = None
) -> list[Tensor | None]:
    """Check each gradient against what its receiving node expects; sum a broadcast gradient
    down to the input's shape and cast it to the input's dtype (so formulas never handle
    broadcasting themselves: see ``InputMetadata``). ``producer``: the node that returned them,
    named in the error messages (none for the gradients given to backward() itself)."""
    if len(grads) != len(edges):
        raise RuntimeError(
            _returned(producer, f"invalid number of gradients - expected {len(edges)}, but got {len(grads)}")
        )
    for i, (fn, input_nr) in enumerate(edges):
        grad = grads[i]
        if fn is None or grad is None:
            continue
        meta: InputMetadata = fn._input_metadata[input_nr]
        if meta.was_default_constructed:
            continue
        if grad._data.shape != meta.shape:
            if _is_expandable_to(meta.shape, grad._data.shape):
                grad = grad.sum_to_size(meta.shape)
            else:
                raise RuntimeError(
                    _returned(
                        producer,
                        f"invalid gradient at index {i} - got {list(grad.shape)} but expected "
                        f"shape compatible with {list(meta.shape)}",
                    )
                )
        if grad._dtype is not meta.dtype:  # else neither check below can fail: nothing to cast
            # A complex gradient for a real input is an error: formulas take the real part
            # themselves where PyTorch's do (derivatives.yaml's handle_r_to_c).
            if not grad._dtype.is_floating_point and meta.dtype.is_complex != grad._dtype.is_complex:
                raise RuntimeError(
                    "Expected isFloatingType(grad.scalar_type()) || (input_is_complex == grad_is_complex) to "
                    "be true, but got false.  (Could this error message be improved?  If so, please report "
                    "an enhancement request to PyTorch.)"
                )
            grad = grad.to(meta.dtype)
        grads[i] = grad
    return grads


def _returned(producer: Node | None, msg: str) -> str:
    return msg if producer is None else f"Function {producer.name()} returned an {msg}"


def _is_expandable_to(shape: tuple[int, ...], desired: tuple[int, ...]) -> bool:
    if len(shape) > len(desired):
        return False
    for s, d in zip(reversed(shape), reversed(desired), strict=False):
        if s != d and s != 1:
            return False
    return True


_engine = Engine()


def get_default_engine() -> Engine:
    return _engine


def is_accumulate_grad(fn: Node | None) -> bool:
    return isinstance(fn, AccumulateGrad)
