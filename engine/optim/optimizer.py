"""``Optimizer``: the base class (PyTorch's ``torch/optim/optimizer.py``).

An optimizer holds ``param_groups`` (lists of parameters, each group with its own
hyper-parameters) and ``state`` (per-parameter tensors such as momentum buffers, keyed by the
parameter itself). ``step()`` updates the parameters in place with grad mode off, so the update is
not recorded in any graph; in-place updates bump each parameter's version counter, which is how a
graph built before the step notices that a saved parameter changed.
"""

from __future__ import annotations

import functools
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable
from copy import deepcopy
from itertools import chain
from typing import Any

from engine import _dtype
from engine._tensor import Tensor, _typename
from engine.autograd.grad_mode import set_grad_enabled
from engine.utils.hooks import RemovableHandle

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Singleton class representing a required parameter for an Optimizer."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _get_scalar_dtype() -> _dtype.dtype:
    # The dtype of state["step"]: float64 only when that is the default dtype.
    return _dtype.float64 if _dtype.get_default_dtype() is _dtype.float64 else _dtype.float32


def _get_value(x: Any) -> Any:
    return x.item() if isinstance(x, Tensor) else x


def _use_grad_for_differentiable(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``step`` with grad mode off, unless the optimizer was built ``differentiable=True``;
    step pre- and post-hooks run around it."""

    @functools.wraps(func)
    def step(self: Optimizer, *args: Any, **kwargs: Any) -> Any:
        for pre_hook in self._optimizer_step_pre_hooks.values():
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"{func} must return None or a tuple of (new_args, new_kwargs), but got {result}."
                    )
                args, kwargs = result
        with set_grad_enabled(self.defaults.get("differentiable", False)):
            out = func(self, *args, **kwargs)
        for post_hook in self._optimizer_step_post_hooks.values():
            post_hook(self, args, kwargs)
        return out

    return step


class Optimizer:
    """Base class: subclasses implement ``step`` over ``self.param_groups`` and ``self.state``."""

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, but got "
                + _typename(params)
            )
        self.state: defaultdict[Any, Any] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_optimizer_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_optimizer_step_post_hooks", OrderedDict())
        self.defaults.setdefault("differentiable", False)

    def _steps_as_tensors(self) -> None:
        """Old pickles kept ``state["step"]`` as a number; since torch 1.12 it is a tensor (the
        ``__setstate__`` of Adam, RMSprop, ...)."""
        from engine._factories import tensor

        for group in self.param_groups:
            for p in group["params"]:
                p_state = self.state.get(p, [])
                if len(p_state) != 0 and not isinstance(p_state["step"], Tensor):
                    p_state["step"] = tensor(float(p_state["step"]), dtype=_get_scalar_dtype())

    def __repr__(self) -> str:
        format_string = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            format_string += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    format_string += f"    {key}: {group[key]}\n"
        return format_string + ")"

    def register_step_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before each ``step``."""
        return RemovableHandle.add(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after each ``step``."""
        return RemovableHandle.add(self._optimizer_step_post_hooks, hook)

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``: parameters
        are replaced by their position across groups, so the dict can be loaded into an
        optimizer over other (same-shaped) parameters."""
        param_mappings: dict[int, int] = {}
        start_index = 0

        def pack_group(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update(
                {id(p): i for i, p in enumerate(group["params"], start_index) if id(p) not in param_mappings}
            )
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {
            (param_mappings[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()
        }
        return {"state": packed_state, "param_groups": param_groups}

    @staticmethod
    def _process_value_according_to_param_policy(
        param: Tensor, value: Tensor, param_id: int, param_groups: list[dict[str, Any]], key: Hashable = None
    ) -> Tensor:
        # "step" keeps its dtype; other state follows the parameter's floating dtype.
        if key == "step":
            return value
        return value.to(param.dtype) if param.is_floating_point() else value  # type: ignore[no-any-return]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a ``state_dict()``: groups and parameters are matched by position."""
        state_dict = state_dict.copy()
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups, strict=True)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's "
                "group"
            )
        id_map = dict(
            zip(
                chain.from_iterable(g["params"] for g in saved_groups),
                chain.from_iterable(g["params"] for g in groups),
                strict=True,
            )
        )

        def _cast(param: Tensor, value: Any, param_id: int, key: Hashable = None) -> Any:
            if isinstance(value, Tensor):
                return Optimizer._process_value_according_to_param_policy(
                    param, value, param_id, state_dict["param_groups"], key
                )
            if isinstance(value, dict):
                return {k: _cast(param, v, param_id, key=k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(_cast(param, v, param_id) for v in value)
            return value

        state: defaultdict[Any, Any] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = _cast(param, v, k)
            else:
                state[k] = v

        def update_group(group: dict[str, Any], new_group: dict[str, Any]) -> dict[str, Any]:
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups, strict=True)]
        self.__setstate__({"state": state, "param_groups": param_groups})

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients: to ``None`` by default, else zero them in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        if p.grad.grad_fn is not None:
                            p.grad.detach_()
                        else:
                            p.grad.requires_grad_(False)
                        p.grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        raise NotImplementedError

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters; options it does not set take the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering of "
                "tensors in sets will change between runs. Please use a list instead."
            )
        else:
            param_group["params"] = list(params)
        tensors: list[Any] = []
        names: list[str] = []
        for param in param_group["params"]:
            if isinstance(param, tuple):
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError(
                    "all optimizer params should be with/without names. Some param names are missing"
                )
            param_group["param_names"] = names
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is " + _typename(param)
                )
            if not self.defaults.get("differentiable", None) and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    f"parameter group didn't specify a value of required optimization parameter {name}"
                )
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len(set(params)):
            import warnings

            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this will "
                "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                stacklevel=3,
            )
        param_set: set[Tensor] = set()
        for group in self.param_groups:
            param_set.update(set(group["params"]))
            if ("param_names" in param_group) != ("param_names" in group):
                txt = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. cannot add param group "
                    f"{txt} to the optimizer"
                )
        if not param_set.isdisjoint(set(param_group["params"])):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)


ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]] | Iterable[tuple[str, Tensor]]
