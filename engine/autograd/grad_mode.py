"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

Each is a context manager and a decorator, and each is thread-local, like PyTorch's.
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from engine._C import _tls

__all__ = [
    "enable_grad",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "no_grad",
    "set_grad_enabled",
]

F = TypeVar("F", bound=Callable[..., Any])


def is_grad_enabled() -> bool:
    """Whether ops record a graph on this thread."""
    return _tls.grad_enabled


def is_inference_mode_enabled() -> bool:
    return _tls.inference_mode


def _wrap_generator(ctx_factory: Callable[[], Any], func: Callable[..., Any]) -> Callable[..., Any]:
    # A generator is suspended at each ``yield``: the mode must hold while its body runs, and
    # not while the caller runs, so it is entered again around every resumption.
    @functools.wraps(func)
    def generator_context(*args: Any, **kwargs: Any) -> Any:
        gen = func(*args, **kwargs)
        try:
            with ctx_factory():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with ctx_factory():
                        gen.close()
                    raise
                except BaseException:
                    with ctx_factory():
                        response = gen.throw(*sys.exc_info())
                else:
                    with ctx_factory():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value

    return generator_context


def context_decorator(ctx_factory: Callable[[], Any], func: F) -> F:
    """Wrap ``func`` so that every call runs inside a fresh context from ``ctx_factory``."""
    if inspect.isclass(func):
        raise RuntimeError(
            "Cannot decorate classes; it is ambiguous whether or not only the constructor or all "
            "methods should have the context manager applied; additionally, decorating a class at "
            "definition-site will prevent use of the identifier as a conventional type.  To "
            "specify which methods to decorate, decorate each of them individually."
        )
    if inspect.isgeneratorfunction(func):
        return _wrap_generator(ctx_factory, func)  # type: ignore[return-value]

    @functools.wraps(func)
    def decorate_context(*args: Any, **kwargs: Any) -> Any:
        with ctx_factory():
            return func(*args, **kwargs)

    return decorate_context  # type: ignore[return-value]


class _DecoratorContextManager:
    """A context manager that also decorates functions (and generator functions)."""

    def __call__(self, orig_func: F) -> F:
        if inspect.isclass(orig_func):
            warnings.warn(
                "Decorating classes is deprecated and will be disabled in future versions. You "
                "should only decorate functions or methods. To preserve the current behavior of "
                "class decoration, you can directly decorate the `__init__` method and nothing "
                "else.",
                FutureWarning,
                stacklevel=2,
            )
            cls = orig_func
            func: Any = lambda *args, **kwargs: cls(*args, **kwargs)  # noqa: E731
        else:
            func = orig_func
        return context_decorator(self.clone, func)  # type: ignore[no-any-return]

    def clone(self) -> _DecoratorContextManager:
        return self.__class__()

    def __enter__(self) -> None:
        raise NotImplementedError

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        raise NotImplementedError


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """Also usable as a decorator without parentheses: ``@no_grad``."""

    def __new__(cls, orig_func: Callable[..., Any] | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecoratorContextManager):  # noqa: N801 - PyTorch's name
    """Disable graph recording on this thread.

    Example::

        >>> import engine
        >>> x = engine.ones(2, requires_grad=True)
        >>> with engine.no_grad():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = _tls.grad_enabled
        _tls.grad_enabled = False

    def __exit__(self, *args: Any) -> None:
        _tls.grad_enabled = self.prev


class enable_grad(_NoParamDecoratorContextManager):  # noqa: N801
    """Enable graph recording on this thread (inside ``no_grad``, for example)."""

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = _tls.grad_enabled
        _tls.grad_enabled = True

    def __exit__(self, *args: Any) -> None:
        _tls.grad_enabled = self.prev


class set_grad_enabled(_DecoratorContextManager):  # noqa: N801
    """Set grad mode to ``mode``; takes effect at once, also when not used as a context."""

    def __init__(self, mode: bool) -> None:
        self.prev = _tls.grad_enabled
        self.mode = mode
        _tls.grad_enabled = mode

    def __call__(self, func: F) -> F:
        _tls.grad_enabled = self.prev
        return super().__call__(func)

    def __enter__(self) -> None:
        _tls.grad_enabled = self.mode

    def __exit__(self, *args: Any) -> None:
        _tls.grad_enabled = self.prev

    def __str__(self) -> str:
        return f"engine.autograd.grad_mode.set_grad_enabled(mode={self.mode})"

    def __repr__(self) -> str:
        return str(self)

    def clone(self) -> set_grad_enabled:
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):  # noqa: N801
    """Like ``no_grad``, and tensors created inside are inference tensors: they have no
    version counter, so autograd refuses to save them or update them in place later."""

    def __init__(self, mode: bool = True) -> None:
        self.mode = mode
        self.prev_grad = True
        self.prev_inference = False

    def __new__(cls, mode: bool = True) -> Any:
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # used as a bare decorator: @inference_mode

    def __enter__(self) -> None:
        # PyTorch's InferenceMode guard sets grad mode to ``not mode``: inference_mode(False)
        # turns grad mode on, even inside no_grad.
        self.prev_grad, self.prev_inference = _tls.grad_enabled, _tls.inference_mode
        _tls.grad_enabled = not self.mode
        _tls.inference_mode = self.mode

    def __exit__(self, *args: Any) -> None:
        _tls.grad_enabled, _tls.inference_mode = self.prev_grad, self.prev_inference

    def clone(self) -> inference_mode:
        return self.__class__(self.mode)


class _force_original_view_tracking(_DecoratorContextManager):  # noqa: N801 - PyTorch's name
    """Set whether autograd always uses view replay; a context manager or a plain call.

    When a view is modified in place, autograd rebuilds its ``grad_fn`` on the base's new history:
    with view replay, by replaying the chain of view ops from the base (``ViewBackward0`` for a
    ``view``), otherwise with one ``as_strided`` (``AsStridedBackward0``). Only views created
    while it is on can be replayed. The setting is thread-local and takes effect at construction
    (so that a plain call works); leaving the ``with`` block restores the previous setting.
    """

    def __init__(self, mode: bool) -> None:
        self.prev = _tls.view_replay_enabled
        _tls.view_replay_enabled = mode
        self.mode = mode

    def __enter__(self) -> None:
        pass

    def __exit__(self, *args: Any) -> None:
        _tls.view_replay_enabled = self.prev

    def clone(self) -> _force_original_view_tracking:
        return self.__class__(self.mode)
