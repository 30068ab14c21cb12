"""Losses: ``mse_loss`` and ``nll_loss`` (``nll_loss2d`` for spatial inputs), each with its
backward op, as in ATen: the node's formula calls ``mse_loss_backward`` / ``nll_loss_backward``,
whose own formulas give double backward (``MseLossBackwardBackward0``...).

``reduction`` is ATen's enum (0 none, 1 mean, 2 sum); ``engine.nn.functional`` maps the strings.
"""

from __future__ import annotations

import numpy as np

from engine._factories import zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import _scalar_type_name, op
from engine.ops._samples import Lit, SampleInput, T

Array = np.ndarray

# ATen's loss reduction enum (at::Reduction).
REDUCTION_NONE, REDUCTION_MEAN, REDUCTION_SUM = 0, 1, 2


# --- mse_loss -----------------------------------------------------------------------------------


def _mse_loss_double_backward(grad: Tensor, input: Tensor, reduction: int) -> Tensor:  # noqa: A002
    out = 2 * grad
    return out / input.numel() if reduction == REDUCTION_MEAN else out


def _reduce(a: Array, reduction: int) -> Array:
    if reduction == REDUCTION_MEAN:
        return np.asarray(a.mean()) if a.size else np.asarray(np.nan, a.dtype)
    if reduction == REDUCTION_SUM:
        return np.asarray(a.sum())
    return a


@op(
    derivatives={
        "self": lambda grad, self, target, reduction: mse_loss_backward(grad, self, target, reduction),
        "target": lambda grad, target, self, reduction: mse_loss_backward(grad, target, self, reduction),
    },
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), T.of(2, 3))),
        SampleInput((T.of(2, 3), T.of(2, 3), REDUCTION_SUM), note="sum"),
        SampleInput((T.of(2, 3), T.of(2, 3), REDUCTION_NONE), note="none"),
        SampleInput((T.of(2, 3), T((2, 3), grad=False)), note="constant target"),
    ],
)
def mse_loss(self: Tensor, target: Tensor, reduction: int = REDUCTION_MEAN) -> Array:
    diff = self - target
    return _reduce(diff * diff, reduction)


@op(
    derivatives={
        "grad_output": lambda grad, self, target, reduction: mse_loss_backward(grad, self, target, reduction),
        "self": lambda grad, grad_output, self, reduction: _mse_loss_double_backward(
            grad * grad_output, self, reduction
        ),
        "target": lambda grad, grad_output, target, reduction: (
            -_mse_loss_double_backward(grad * grad_output, target, reduction)
        ),
    },
    method=False,
    function=False,
)
def mse_loss_backward(grad_output: Tensor, self: Tensor, target: Tensor, reduction: int) -> Array:
    norm = 2.0 / self.size if reduction == REDUCTION_MEAN else 2.0
    return norm * (self - target) * grad_output


# --- nll_loss -----------------------------------------------------------------------------------
# nll_loss_forward takes (N, C) or (C,) inputs; nll_loss2d_forward (N, C, H, W). Both pick
# -input[n, target[n], ...] * weight[target[n]] for every non-ignored target.


def _nll_pick(
    self: Array, target: Array, weight: Array | None, ignore_index: int
) -> tuple[Array, Array, Array, Array]:
    """Per-element losses, their class weights (0 where ignored), the targets with ignored ones
    replaced by 0 (so they can index), and the ignored mask."""
    n_classes = self.shape[1] if self.ndim > 1 else self.shape[0]
    ignored = target == ignore_index
    bad = ~ignored & ((target < 0) | (target >= n_classes))
    if bad.any():
        raise IndexError(f"Target {int(target[bad].flat[0])} is out of bounds.")
    safe = np.where(ignored, 0, target)
    if self.ndim == 1:
        picked = self[safe]
    else:
        picked = np.take_along_axis(self, np.expand_dims(safe, 1), axis=1).squeeze(1)
    w = np.ones_like(picked) if weight is None else weight[safe].astype(self.dtype)
    w = np.where(ignored, 0, w).astype(self.dtype)
    return -picked * w, w, safe, ignored


def _nll_forward(
    self: Array, target: Array, weight: Array | None, reduction: int, ignore_index: int, per_element: bool
) -> tuple[Array, Array]:
    if target.dtype not in (np.int64, np.uint8):
        raise RuntimeError(f"expected scalar type Long but found {_scalar_type_name(target.dtype)}")
    losses, w, _, _ = _nll_pick(self, target, weight, ignore_index)
    if reduction == REDUCTION_NONE and per_element:
        # The unreduced loss leaves total_weight at 0, as ATen does.
        return losses, np.zeros((), self.dtype)
    total = np.asarray(w.sum(), self.dtype)
    out = np.asarray(losses.sum(), self.dtype)
    if reduction == REDUCTION_MEAN:
        with np.errstate(invalid="ignore", divide="ignore"):  # all targets ignored: nan, as in ATen
            out = np.asarray(out / total, self.dtype)
    return out, total


def _nll_backward(
    grad_output: Array,
    self: Array,
    target: Array,
    weight: Array | None,
    reduction: int,
    ignore_index: int,
    total_weight: Array,
    per_element: bool,
) -> Array:
    _, w, safe, ignored = _nll_pick(self, target, weight, ignore_index)
    if reduction == REDUCTION_NONE and per_element:
        scale = -w * grad_output
    else:
        with np.errstate(invalid="ignore", divide="ignore"):  # all ignored: total_weight is 0
            g = (
                grad_output.reshape(()) / total_weight
                if reduction == REDUCTION_MEAN
                else grad_output.reshape(())
            )
            scale = -w * g
    # Ignored targets get no gradient at all (not 0 * inf).
    scale = np.where(ignored, 0, scale)
    out = np.zeros_like(self)
    if self.ndim == 1:
        out[safe] = scale
    else:
        np.put_along_axis(out, np.expand_dims(safe, 1), np.expand_dims(scale, 1).astype(self.dtype), axis=1)
    return out


def _check_nll(self: Array, target: Array, weight: Array | None) -> None:
    if not 0 < self.ndim <= 2:
        raise RuntimeError("input tensor should be 1D or 2D")
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if not (self.ndim == 1 and target.ndim == 0) and self.shape[0] != target.shape[0]:
        raise RuntimeError(f"size mismatch (got input: {list(self.shape)}, target: {list(target.shape)})")
    _check_weight(self.shape[-1], weight)


def _check_weight(n_classes: int, weight: Array | None) -> None:
    if weight is not None and (weight.ndim != 1 or weight.size != n_classes):
        raise RuntimeError(
            f"weight tensor should be defined either for all {n_classes} classes or no classes but got "
            f"weight tensor of shape: {list(weight.shape)}"
        )


def _nll_samples() -> list[SampleInput]:
    target = Lit([0, 1, 4, 2])
    return [
        SampleInput((T.of(4, 5), target, None, REDUCTION_MEAN, -100)),
        SampleInput((T.of(4, 5), target, T((5,), 0.5, 2.0, grad=False), REDUCTION_MEAN, -100), note="weight"),
        SampleInput((T.of(4, 5), target, None, REDUCTION_SUM, 1), note="sum ignore_index"),
        SampleInput((T.of(4, 5), target, T((5,), 0.5, 2.0, grad=False), REDUCTION_NONE, 4), note="none"),
        SampleInput((T.of(5), Lit(3), None, REDUCTION_MEAN, -100), note="no batch dim"),
        SampleInput((T.of(2, 3), Lit([1, 1]), None, REDUCTION_MEAN, 1), note="all ignored", gradcheck=False),
    ]


@op(
    derivatives={
        "self": lambda grad, self, target, weight, reduction, ignore_index, total_weight: nll_loss_backward(
            grad, self, target, weight, reduction, ignore_index, total_weight
        )
    },
    name="nll_loss_forward",
    node="NllLossBackward0",
    outputs=("output", "total_weight"),
    differentiable_outputs=(True, False),
    dtypes="keep",
    method=False,
    function=False,
    samples=_nll_samples,
)
def nll_loss_forward(
    self: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int
) -> tuple[Array, Array]:
    _check_nll(self, target, weight)
    return _nll_forward(self, target, weight, reduction, ignore_index, per_element=self.ndim == 2)


@op(
    derivatives={
        "grad_output": lambda grad, target, weight, reduction, ignore_index: nll_loss_forward(
            grad, target, weight, reduction, ignore_index
        )[0],
        "self": lambda grad: zeros_like(grad),
    },
    dtypes="keep",
    method=False,
    function=False,
)
def nll_loss_backward(
    grad_output: Tensor,
    self: Tensor,
    target: Tensor,
    weight: Tensor | None,
    reduction: int,
    ignore_index: int,
    total_weight: Tensor,
) -> Array:
    return _nll_backward(
        grad_output, self, target, weight, reduction, ignore_index, total_weight, per_element=self.ndim == 2
    )


def _check_nll2d(self: Array, target: Array, weight: Array | None) -> None:
    if self.ndim != 4:
        raise RuntimeError(
            "only batches of spatial inputs supported (4D tensors), but got input of size: "
            f"{list(self.shape)}"
        )
    if target.ndim != 3:
        raise RuntimeError(
            "only batches of spatial targets supported (3D tensors) but got targets of size: "
            f"{list(target.shape)}"
        )
    if self.shape[0] != target.shape[0] or self.shape[2:] != target.shape[1:]:
        raise RuntimeError(
            f"input and target batch or spatial sizes don't match: target {list(target.shape)}, input "
            f"{list(self.shape)}"
        )
    _check_weight(self.shape[1], weight)


@op(
    derivatives={
        "self": lambda grad, self, target, weight, reduction, ignore_index, total_weight: nll_loss2d_backward(
            grad, self, target, weight, reduction, ignore_index, total_weight
        )
    },
    name="nll_loss2d_forward",
    node="NllLoss2DBackward0",
    outputs=("output", "total_weight"),
    differentiable_outputs=(True, False),
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 4, 3, 2), T.index(2, 3, 2, high=4), None, REDUCTION_MEAN, -100)),
        SampleInput(
            (T.of(2, 4, 1, 3), Lit([[[0, 3, 1]], [[2, 2, 0]]]), None, REDUCTION_NONE, 2), note="none"
        ),
        SampleInput(
            (T.of(1, 3, 2, 2), Lit([[[0, 1], [2, 1]]]), T((3,), 0.5, 2, grad=False), REDUCTION_SUM, 0),
            note="sum",
        ),
    ],
)
def nll_loss2d_forward(
    self: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int
) -> tuple[Array, Array]:
    _check_nll2d(self, target, weight)
    return _nll_forward(self, target, weight, reduction, ignore_index, per_element=True)


@op(
    derivatives={
        "grad_output": lambda grad, target, weight, reduction, ignore_index: nll_loss2d_forward(
            grad, target, weight, reduction, ignore_index
        )[0],
        "self": lambda grad: zeros_like(grad),
    },
    dtypes="keep",
    method=False,
    function=False,
)
def nll_loss2d_backward(
    grad_output: Tensor,
    self: Tensor,
    target: Tensor,
    weight: Tensor | None,
    reduction: int,
    ignore_index: int,
    total_weight: Tensor,
) -> Array:
    return _nll_backward(
        grad_output, self, target, weight, reduction, ignore_index, total_weight, per_element=True
    )
