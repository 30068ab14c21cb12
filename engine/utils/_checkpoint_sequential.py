"""``checkpoint_sequential``: a sequential model checkpointed in segments.

Part of ``engine/utils/checkpoint.py`` (PyTorch 2.8's ``torch/utils/checkpoint.py``, where it
follows ``checkpoint``): every segment but the last is one ``checkpoint()`` call.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import engine

__all__ = ["checkpoint_sequential"]


def checkpoint_sequential(
    functions: Any,
    segments: int,
    input: Any,
    use_reentrant: bool | None = None,
    **kwargs: Any,  # noqa: A002
) -> Any:
    r"""Checkpoint a sequential model to save memory.

    ``functions`` (an ``engine.nn.Sequential`` or a list of modules or functions) is split into
    ``segments`` chunks run one after the other; every chunk but the last is checkpointed, so
    only the inputs of the chunks are kept for backward.

    Args:
        functions: the modules/functions to run in order.
        segments: number of chunks.
        input: the tensor given to the first function.
        preserve_rng_state: keyword, as for :func:`checkpoint`.
        use_reentrant: as for :func:`checkpoint`; should be passed explicitly.

    Example::

        >>> import engine
        >>> from engine.utils.checkpoint import checkpoint_sequential
        >>> fns = [lambda t: t.sin(), lambda t: t.exp(), lambda t: t.cos(), lambda t: t.tanh()]
        >>> x = engine.ones(3, requires_grad=True)
        >>> out = checkpoint_sequential(fns, 2, x, use_reentrant=False)
    """
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
            "parameter should be passed explicitly. "
            "In version 2.5 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is "
            "recommended, but if you need to preserve the current default "
            "behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.",
            stacklevel=2,
        )
        use_reentrant = True

    # Hack for keyword-only parameter in a python 2.7-compliant way
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run_function(start: int, end: int, functions: list[Any]) -> Callable[[Any], Any]:
        def forward(input: Any) -> Any:  # noqa: A002
            for j in range(start, end + 1):
                input = functions[j](input)
            return input

        return forward

    # Looked up on engine.utils.checkpoint at each call, as PyTorch's module global is, so that
    # setting ``checkpoint`` there applies here too (imported here: that module imports this one).
    # See Note [Checkpoint's sibling modules] in engine/utils/checkpoint.py.
    from engine.utils.checkpoint import checkpoint

    if isinstance(functions, engine.nn.Sequential):
        functions = list(functions.children())

    segment_size = len(functions) // segments
    # the last chunk has to be non-volatile
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(
            run_function(start, end, functions),
            input,
            use_reentrant=use_reentrant,
            preserve_rng_state=preserve,
        )
    return run_function(end + 1, len(functions) - 1, functions)(input)
