"""Higher-level autograd: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``vhp``, ``hvp``.

A port of ``torch/autograd/functional.py``: every function here is a few calls of
``engine.autograd.grad`` on a fresh copy of the inputs, with the same argument checks, the same
``strict`` errors and the same handling of ``create_graph``. Only reverse mode exists in the
engine, so ``jvp`` and ``hvp`` use the double-backward trick (see Note [Double-backward trick]),
exactly as PyTorch does, and ``jacobian(..., strategy="forward-mode")`` is not supported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import engine
from engine._tensor import Tensor

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]

TensorOrTensors = Tensor | tuple[Tensor, ...]


def _as_tuple_nocheck(x: Any) -> tuple[Any, ...]:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _as_tuple(inp: Any, arg_name: str | None = None, fn_name: str | None = None) -> Any:
    """``(was_tuple, tuple_of_tensors)``; checks that every element is a tensor."""
    if arg_name is None and fn_name is None:
        return _as_tuple_nocheck(inp)
    is_inp_tuple = True
    if not isinstance(inp, tuple):
        inp = (inp,)
        is_inp_tuple = False
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            if is_inp_tuple:
                raise TypeError(
                    f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors "
                    f"but the value at index {i} has type {type(el)}."
                )
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                f"the given {arg_name} has type {type(el)}."
            )
    return is_inp_tuple, inp


def _tuple_postprocess(res: Any, to_unpack: bool | tuple[bool, bool]) -> Any:
    """Undo ``_as_tuple``: unwrap the results the user did not pass as tuples."""
    if isinstance(to_unpack, tuple):
        assert len(to_unpack) == 2
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs: tuple[Tensor, ...], create_graph: bool, need_graph: bool) -> tuple[Tensor, ...]:
    # With create_graph, the result must stay connected to the user's inputs, so a view of each
    # input is used (a differentiable alias with its own grad_fn); otherwise a detached copy
    # that requires grad starts a fresh graph that cannot leak into the user's.
    res: list[Tensor] = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs: Any, create_graph: bool) -> Any:
    if isinstance(inputs[0], Tensor):
        if not create_graph:
            return tuple(inp.detach() for inp in inputs)
        return inputs
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v: tuple[Tensor, ...], other: tuple[Tensor, ...], is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other, strict=True)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                # torch prints its Size's repr here; PyTorch's tests match "torch.Size".
                f"{prepend}v has invalid size: should be torch.Size({list(el_other.size())}) but got "
                f"torch.Size({list(el_v.size())})."
            )


def _check_requires_grad(inputs: Sequence[Tensor | None], input_type: str, strict: bool) -> None:
    if not strict:
        return
    if input_type not in ("outputs", "grad_inputs", "jacobian", "hessian"):
        raise RuntimeError("Invalid input_type to _check_requires_grad")
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This is not "
                "allowed in strict mode."
            )
        if inp.requires_grad:
            continue
        if input_type == "hessian":
            raise RuntimeError(
                f"The hessian of the user-provided function with respect to input {i} is independent of "
                "the input. This is not allowed in strict mode. You should ensure that your function is "
                "thrice differentiable and that the hessian depends on the inputs."
            )
        if input_type == "jacobian":
            raise RuntimeError(
                "While computing the hessian, found that the jacobian of the user-provided function with "
                f"respect to input {i} is independent of the input. This is not allowed in strict mode. "
                "You should ensure that your function is twice differentiable and that the jacobian "
                "depends on the inputs (this would be violated by a linear function for example)."
            )
        if input_type == "grad_inputs":
            raise RuntimeError(
                f"The gradient with respect to input {i} is independent of the inputs of the "
                "user-provided function. This is not allowed in strict mode."
            )
        raise RuntimeError(
            f"Output {i} of the user-provided function does not require gradients. The outputs must be "
            "computed in a differentiable manner from the input when running in strict mode."
        )


def _autograd_grad(
    outputs: tuple[Tensor | None, ...],
    inputs: tuple[Tensor, ...],
    grad_outputs: tuple[Tensor | None, ...] | None = None,
    create_graph: bool = False,
    retain_graph: bool | None = None,
) -> tuple[Tensor | None, ...]:
    """``autograd.grad`` that skips outputs not requiring grad (their contribution is zero) and
    returns None for inputs the outputs do not depend on."""
    assert isinstance(outputs, tuple)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    assert isinstance(grad_outputs, tuple)
    assert len(outputs) == len(grad_outputs)
    new_outputs: tuple[Tensor, ...] = ()
    new_grad_outputs: tuple[Tensor | None, ...] = ()
    for out, grad_out in zip(outputs, grad_outputs, strict=True):
        if out is not None and out.requires_grad:
            new_outputs += (out,)
            new_grad_outputs += (grad_out,)
    if len(new_outputs) == 0:
        return (None,) * len(inputs)
    return engine.autograd.grad(
        new_outputs,
        inputs,
        new_grad_outputs,
        allow_unused=True,
        create_graph=create_graph,
        retain_graph=retain_graph,
    )


def _fill_in_zeros(
    grads: tuple[Tensor | None, ...], refs: tuple[Tensor, ...], strict: bool, create_graph: bool, stage: str
) -> tuple[Tensor, ...]:
    """Replace None gradients by zeros, or raise in strict mode (the message says which stage)."""
    if stage not in ("back", "back_trick", "double_back", "double_back_trick"):
        raise RuntimeError(f"Invalid stage argument '{stage}' to _fill_in_zeros")
    res: tuple[Tensor, ...] = ()
    for i, grads_i in enumerate(grads):
        if grads_i is None:
            if strict:
                if stage == "back":
                    raise RuntimeError(
                        f"The output of the user-provided function is independent of input {i}. This is "
                        "not allowed in strict mode."
                    )
                if stage == "back_trick":
                    raise RuntimeError(
                        f"The gradient with respect to the input is independent of entry {i} in the "
                        "grad_outputs when using the double backward trick to compute forward mode "
                        "gradients. This is not allowed in strict mode."
                    )
                if stage == "double_back":
                    raise RuntimeError(
                        f"The jacobian of the user-provided function is independent of input {i}. This "
                        "is not allowed in strict mode."
                    )
                raise RuntimeError(
                    f"The hessian of the user-provided function is independent of entry {i} in the "
                    "grad_jacobian. This is not allowed in strict mode as it prevents from using the "
                    "double backward trick to replace forward mode AD."
                )
            grads_i = engine.zeros_like(refs[i])
        elif strict and create_graph and not grads_i.requires_grad:
            if "double" not in stage:
                raise RuntimeError(
                    f"The jacobian of the user-provided function is independent of input {i}. This is "
                    "not allowed in strict mode when create_graph=True."
                )
            raise RuntimeError(
                f"The hessian of the user-provided function is independent of input {i}. This is not "
                "allowed in strict mode when create_graph=True."
            )
        res += (grads_i,)
    return res


def vjp(
    func: Callable[..., Any],
    inputs: TensorOrTensors,
    v: TensorOrTensors | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """The outputs of ``func(*inputs)`` and the vector-Jacobian product ``v^T J``.

    Example::

        >>> import engine
        >>> from engine.autograd.functional import vjp
        >>> out, g = vjp(lambda x: x**2, engine.tensor([1.0, 2.0]), engine.tensor([1.0, 1.0]))
        >>> g
        tensor([2., 4.])
    """
    with engine.enable_grad():
        is_inputs_tuple, inputs_t = _as_tuple(inputs, "inputs", "vjp")
        inputs_t = _grad_preprocess(inputs_t, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs_t)
        is_outputs_tuple, outputs_t = _as_tuple(outputs, "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs_t, "outputs", strict=strict)
        v_t: tuple[Tensor, ...] | None = None
        if v is not None:
            _, v_t = _as_tuple(v, "v", "vjp")
            v_t = _grad_preprocess(v_t, create_graph=create_graph, need_graph=False)
            _validate_v(v_t, outputs_t, is_outputs_tuple)
        elif len(outputs_t) != 1 or outputs_t[0].nelement() != 1:
            raise RuntimeError(
                "The vector v can only be None if the user-provided function returns a single Tensor "
                "with a single element."
            )
    enable_grad = True if create_graph else engine.is_grad_enabled()
    with engine.set_grad_enabled(enable_grad):
        grad_res = _autograd_grad(outputs_t, inputs_t, v_t, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs_t, strict, create_graph, "back")
    outputs_t = _grad_postprocess(outputs_t, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs_t, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


# Note [Double-backward trick]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Reverse mode gives vector-Jacobian products u -> J^T u. That map is linear in u, and its own
# vector-Jacobian product (with respect to u, for a cotangent v) is (J^T)^T v = J v: the
# Jacobian-vector product. So jvp runs backward once with a dummy u (zeros that require grad),
# keeping the graph (create_graph=True) of g(u) = J^T u, then differentiates g with respect to u
# with cotangent v. hvp does the same on top of the gradient: with g(u) = H^T u (H^T = H for a
# twice continuously differentiable function, but the trick does not rely on it), it returns H v.
# This costs two backward passes instead of one forward-mode pass, as in PyTorch.


def jvp(
    func: Callable[..., Any],
    inputs: TensorOrTensors,
    v: TensorOrTensors | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """The outputs of ``func(*inputs)`` and the Jacobian-vector product ``J v`` (computed by the
    double-backward trick, see Note [Double-backward trick])."""
    with engine.enable_grad():
        _, inputs_t, v_t, is_outputs_tuple, outputs_t = _check_v_and_run(
            func, inputs, v, create_graph, strict, "jvp"
        )
        # The backward graph of u -> J^T u, with u a dummy that requires grad.
        grad_outputs = tuple(engine.zeros_like(out, requires_grad=True) for out in outputs_t)
        grad_inputs = _autograd_grad(outputs_t, inputs_t, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    enable_grad = True if create_graph else engine.is_grad_enabled()
    with engine.set_grad_enabled(enable_grad):
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v_t, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, outputs_t, strict, create_graph, "back_trick")
    outputs_t = _grad_postprocess(outputs_t, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs_t, is_outputs_tuple), _tuple_postprocess(result, is_outputs_tuple)


def _construct_standard_basis_for(
    tensors: tuple[Tensor, ...], tensor_numels: tuple[int, ...]
) -> tuple[Tensor, ...]:
    """The ``N x N`` identity (``N = sum(tensor_numels)``) split column-wise into one chunk per
    tensor, each chunk with its tensor's dtype: PyTorch's helper for vectorized ``jacobian``.
    With ``tensor_numels = (1, 2)`` the chunks are ``[[1], [0], [0]]`` and
    ``[[0, 0], [1, 0], [0, 1]]``."""
    assert len(tensors) == len(tensor_numels)
    assert len(tensors) > 0
    total_numel = sum(tensor_numels)
    chunks = tuple(
        tensor.new_zeros(total_numel, tensor_numel)
        for tensor, tensor_numel in zip(tensors, tensor_numels, strict=True)
    )
    diag_start_idx = 0
    for chunk, numel in zip(chunks, tensor_numels, strict=True):
        chunk.diagonal(diag_start_idx).fill_(1)
        diag_start_idx -= numel
    return chunks


def jacobian(
    func: Callable[..., Any],
    inputs: TensorOrTensors,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Any:
    """The Jacobian of ``func`` at ``inputs``: one backward per output element.

    For a single input and output the result is a tensor of shape ``out.shape + in.shape``;
    with tuples, ``result[i][j]`` is the Jacobian of output ``i`` with respect to input ``j``.
    ``vectorize=True`` gives the same values (the engine has no vmap, so it loops too).
    """
    assert strategy in ("forward-mode", "reverse-mode"), (
        'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function has more '
        'outputs than inputs, "forward-mode" tends to be more performant. Otherwise, prefer to use '
        '"reverse-mode".'
    )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either set '
                '`create_graph=False` or `strategy="reverse-mode"`.'
            )
        if strict:
            raise RuntimeError(
                'torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are '
                'not supported together (yet). Please either set `strict=False` or `strategy="reverse-mode"`.'
            )
        raise NotImplementedError(
            'engine.autograd.functional.jacobian: strategy="forward-mode" needs forward-mode AD, which '
            'the engine does not implement. Use strategy="reverse-mode".'
        )
    with engine.enable_grad():
        is_inputs_tuple, inputs_t = _as_tuple(inputs, "inputs", "jacobian")
        inputs_t = _grad_preprocess(inputs_t, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs_t)
        is_outputs_tuple, outputs_t = _as_tuple(outputs, "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs_t, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError(
                "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                "supported together. Please either set `strict=False` or `vectorize=False`."
            )
        jacobian: tuple[tuple[Tensor, ...], ...] = ()
        for i, out in enumerate(outputs_t):
            jac_i: tuple[list[Tensor], ...] = tuple([] for _ in range(len(inputs_t)))
            for j in range(out.nelement()):
                vj = _autograd_grad(
                    (out.reshape(-1).select(0, j),), inputs_t, retain_graph=True, create_graph=create_graph
                )
                for el_idx, (jac_i_el, vj_el, inp_el) in enumerate(zip(jac_i, vj, inputs_t, strict=True)):
                    if vj_el is not None:
                        if strict and create_graph and not vj_el.requires_grad:
                            raise RuntimeError(
                                f"The jacobian of the user-provided function is independent of input {i}. "
                                "This is not allowed in strict mode when create_graph=True."
                            )
                        jac_i_el.append(vj_el)
                    else:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is independent of input "
                                f"{el_idx}. This is not allowed in strict mode."
                            )
                        jac_i_el.append(engine.zeros_like(inp_el))
            jacobian += (
                tuple(
                    _stack_rows(jac_i_el, inputs_t[el_idx]).view(
                        tuple(out.size()) + tuple(inputs_t[el_idx].size())
                    )
                    for el_idx, jac_i_el in enumerate(jac_i)
                ),
            )
        jacobian = _grad_postprocess(jacobian, create_graph)
        return _tuple_postprocess(jacobian, (is_outputs_tuple, is_inputs_tuple))


def _stack_rows(rows: list[Tensor], like: Tensor) -> Tensor:
    # A 0-element output has no rows: its Jacobian is empty, with the input's dtype.
    if not rows:
        return engine.zeros((0, *like.shape), dtype=like.dtype)
    return engine.ops.stack(rows, dim=0)


def hessian(
    func: Callable[..., Any],
    inputs: TensorOrTensors,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Any:
    """The Hessian of a scalar function: the Jacobian of its gradient (``result[i][j]`` is the
    block for inputs ``i`` and ``j`` when ``inputs`` is a tuple)."""
    is_inputs_tuple, inputs_t = _as_tuple(inputs, "inputs", "hessian")
    assert outer_jacobian_strategy in ("forward-mode", "reverse-mode"), (
        'Expected strategy to be either "forward-mode" or "reverse-mode".'
    )

    def ensure_single_output_function(*inp: Tensor) -> Tensor:
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single element"
            )
        return out.squeeze()

    def jac_func(*inp: Tensor) -> Any:
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(
        jac_func,
        inputs_t,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _check_v_and_run(
    func: Callable[..., Any],
    inputs: TensorOrTensors,
    v: TensorOrTensors | None,
    create_graph: bool,
    strict: bool,
    name: str,
) -> tuple[bool, tuple[Tensor, ...], tuple[Tensor, ...] | None, bool, tuple[Tensor, ...]]:
    """What jvp, vhp and hvp share (PyTorch spells it out in each): check ``inputs`` and ``v``,
    which pairs with the inputs, then run ``func`` on a fresh copy of the inputs."""
    is_inputs_tuple, inputs_t = _as_tuple(inputs, "inputs", name)
    inputs_t = _grad_preprocess(inputs_t, create_graph=create_graph, need_graph=True)
    v_t: tuple[Tensor, ...] | None = None
    if v is not None:
        _, v_t = _as_tuple(v, "v", name)
        v_t = _grad_preprocess(v_t, create_graph=create_graph, need_graph=False)
        _validate_v(v_t, inputs_t, is_inputs_tuple)
    elif len(inputs_t) != 1 or inputs_t[0].nelement() != 1:
        raise RuntimeError(
            "The vector v can only be None if the input to the user-provided function is a single Tensor "
            "with a single element."
        )
    outputs = func(*inputs_t)
    is_outputs_tuple, outputs_t = _as_tuple(outputs, "outputs of the user-provided function", name)
    _check_requires_grad(outputs_t, "outputs", strict=strict)
    return is_inputs_tuple, inputs_t, v_t, is_outputs_tuple, outputs_t


def _hessian_setup(
    func: Callable[..., Any],
    inputs: TensorOrTensors,
    v: TensorOrTensors | None,
    create_graph: bool,
    strict: bool,
    name: str,
) -> tuple[
    bool, tuple[Tensor, ...], tuple[Tensor, ...] | None, bool, tuple[Tensor, ...], tuple[Tensor | None, ...]
]:
    """What vhp and hvp share: run ``func`` and keep the graph of its gradient."""
    is_inputs_tuple, inputs_t, v_t, is_outputs_tuple, outputs_t = _check_v_and_run(
        func, inputs, v, create_graph, strict, name
    )
    if is_outputs_tuple or not isinstance(outputs_t[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs_t[0].nelement() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {name} should contain a single element"
        )
    jac = _autograd_grad(outputs_t, inputs_t, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs_t, v_t, is_outputs_tuple, outputs_t, jac


def vhp(
    func: Callable[..., Any],
    inputs: TensorOrTensors,
    v: TensorOrTensors | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """The output of the scalar ``func(*inputs)`` and the vector-Hessian product ``v^T H``."""
    with engine.enable_grad():
        is_inputs_tuple, inputs_t, v_t, is_outputs_tuple, outputs_t, jac = _hessian_setup(
            func, inputs, v, create_graph, strict, "vhp"
        )
    enable_grad = True if create_graph else engine.is_grad_enabled()
    with engine.set_grad_enabled(enable_grad):
        grad_res = _autograd_grad(jac, inputs_t, v_t, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs_t, strict, create_graph, "double_back")
    outputs_t = _grad_postprocess(outputs_t, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs_t, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def hvp(
    func: Callable[..., Any],
    inputs: TensorOrTensors,
    v: TensorOrTensors | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """The output of the scalar ``func(*inputs)`` and the Hessian-vector product ``H v`` (by the
    double-backward trick, see Note [Double-backward trick])."""
    with engine.enable_grad():
        is_inputs_tuple, inputs_t, v_t, is_outputs_tuple, outputs_t, jac = _hessian_setup(
            func, inputs, v, create_graph, strict, "hvp"
        )
        grad_jac = tuple(engine.zeros_like(inp, requires_grad=True) for inp in inputs_t)
        double_back = _autograd_grad(jac, inputs_t, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    enable_grad = True if create_graph else engine.is_grad_enabled()
    with engine.set_grad_enabled(enable_grad):
        grad_res = _autograd_grad(double_back, grad_jac, v_t, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs_t, strict, create_graph, "double_back_trick")
    outputs_t = _grad_postprocess(outputs_t, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs_t, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)
