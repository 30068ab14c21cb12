"""Random numbers of a scenario run on torch, drawn from the engine's generator.

Note [One random stream for both backends]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The engine's generator is NumPy's PCG64, not torch's mt19937, so ``torch.randn(3)`` gives other
values in each library, and the gradients of the same scenario could not be compared. While a
scenario written for the engine runs on torch (``engine_rng()``), torch's sampling entry points
that scenarios and layer initialisation use (``manual_seed``, ``randn``, ``rand``, ``randint``,
their ``*_like``, ``Tensor.uniform_``/``normal_``, which ``nn.init`` fills through) take their
values from the engine's generator instead, in the same order as the engine draws them. So
inputs and parameters are equal, and so must be the gradients.

Dropout draws its mask inside ATen (on the CPU ``dropout`` is ``empty_like(x).bernoulli_(1 - p)``,
then ``div_`` and ``mul``), out of reach of Python patches, so a ``TorchDispatchMode`` below
autograd fills ``bernoulli_`` from the engine's generator exactly as the engine's
``_dropout_noise`` does. The graph torch records is unchanged (the mode is under autograd).

Checkpointing replays the mask by saving ``torch.get_rng_state()`` before the forward and
restoring it in the recomputation (and ``fork_rng`` restores it after). Those two calls are
patched too: the state tensor they hand out carries the engine's generator state with it, so
restoring one restores both streams. User PyTorch scripts never run under any of this.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

# The engine generator's state that travels with a torch RNG state tensor (see the Note).
_ENGINE_STATE = "_autograd_lens_engine_rng_state"


def _size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...]:
    if "size" in kwargs:
        size = kwargs.pop("size")
        return tuple(size) if isinstance(size, list | tuple) else (int(size),)
    if len(args) == 1 and isinstance(args[0], list | tuple):
        return tuple(args[0])
    return tuple(int(a) for a in args)


@contextlib.contextmanager
def engine_rng(torch: Any) -> Iterator[None]:
    """Route torch's sampling entry points to the engine's generator (see the Note)."""
    import engine
    from engine import random as engine_random
    from engine.trace import emit

    undo: list[Callable[[], None]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        old = getattr(owner, name)
        setattr(owner, name, value)
        undo.append(lambda: setattr(owner, name, old))

    def draw(sample: Callable[..., Any], *args: Any) -> Any:
        with emit.paused():
            return sample(*args).numpy()

    def as_torch(values: Any, kwargs: dict[str, Any], like: Any = None) -> Any:
        dtype = kwargs.get("dtype") or (like.dtype if like is not None else torch.get_default_dtype())
        out = torch.tensor(values, dtype=dtype)
        if kwargs.get("requires_grad"):
            out.requires_grad_(True)
        return out

    def factory(sample: Callable[..., Any]) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            size = _size(args, kwargs)
            return as_torch(draw(sample, size), kwargs)

        return make

    def like(sample: Callable[..., Any]) -> Callable[..., Any]:
        def make(t: Any, **kwargs: Any) -> Any:
            return as_torch(draw(sample, tuple(t.shape)), kwargs, t)

        return make

    def randint(*args: Any, **kwargs: Any) -> Any:
        size = kwargs.pop("size", None)
        if size is None:
            *bounds, size = args
        else:
            bounds = list(args)
        low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
        values = draw(engine.randint, low, high, tuple(size))
        return torch.tensor(values, dtype=kwargs.get("dtype") or torch.int64)

    def fill(sample: Callable[..., Any]) -> Callable[..., Any]:
        def fill_(self: Any, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> Any:
            values = draw(sample, tuple(self.shape), a, b)
            with torch.no_grad():
                self.copy_(torch.tensor(values, dtype=self.dtype))
            return self

        return fill_

    def manual_seed(seed: int) -> Any:
        with emit.paused():
            engine.manual_seed(seed)
        return torch.random.manual_seed(seed)

    def get_rng_state() -> Any:
        state = get_torch_state()
        setattr(state, _ENGINE_STATE, engine_random.get_rng_state())
        return state

    def set_rng_state(state: Any) -> None:
        set_torch_state(state)
        if hasattr(state, _ENGINE_STATE):
            engine_random.set_rng_state(getattr(state, _ENGINE_STATE))

    get_torch_state, set_torch_state = torch.get_rng_state, torch.set_rng_state
    for owner in (torch, torch.random):
        patch(owner, "get_rng_state", get_rng_state)
        patch(owner, "set_rng_state", set_rng_state)
    patch(torch, "manual_seed", manual_seed)
    patch(torch, "randn", factory(lambda size: engine.randn(*size)))
    patch(torch, "rand", factory(lambda size: engine.rand(*size)))
    patch(torch, "randn_like", like(lambda size: engine.randn(*size)))
    patch(torch, "rand_like", like(lambda size: engine.rand(*size)))
    patch(torch, "randint", randint)
    init = engine.nn.init
    patch(torch.Tensor, "uniform_", fill(lambda size, a, b: init.uniform_(engine.empty(*size), a, b)))
    patch(torch.Tensor, "normal_", fill(lambda size, m, s: init.normal_(engine.empty(*size), m, s)))
    try:
        with _engine_bernoulli(torch):
            yield
    finally:
        while undo:
            undo.pop()()


def _engine_bernoulli(torch: Any) -> Any:
    """A dispatch mode filling ``bernoulli_(p)`` as the engine's dropout draws its mask."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from engine.random import default_generator

    bernoulli_ = torch.ops.aten.bernoulli_.float

    class EngineBernoulli(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            kwargs = kwargs or {}
            if func is not bernoulli_:
                return func(*args, **kwargs)
            out, p = args[0], (args[1] if len(args) > 1 else kwargs.get("p", 0.5))
            keep = default_generator._np.random(tuple(out.shape)) < p
            out.copy_(torch.from_numpy(keep.astype("float64")))
            return out

    return EngineBernoulli()
