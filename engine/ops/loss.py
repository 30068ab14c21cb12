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


# --- binary_cross_entropy -----------------------------------------------------------------------
# ATen's CPU kernel clamps both logs at -100 so that a probability of exactly 0 or 1 gives a
# finite loss, and the backward divides by max((1 - x) x, 1e-12).

_BCE_EPS = 1e-12


def _bce_scale(grad: Tensor, weight: Tensor | None, reduction: int, numel: int) -> Tensor:
    if weight is not None:
        grad = grad * weight
    return grad / numel if reduction == REDUCTION_MEAN else grad


def _bce_target_backward(
    grad: Tensor, self: Tensor, target: Tensor, weight: Tensor | None, reduction: int
) -> Tensor:
    # FunctionsManual's binary_cross_entropy_target_backward: -logit(self) * grad.
    logit = (self / (1 - self)).log()
    return _bce_scale(-logit * grad, weight, reduction, target.numel())


def _bce_double_backward(
    grad_output: Tensor, grad: Tensor, self: Tensor, target: Tensor, weight: Tensor | None, reduction: int
) -> Tensor:
    # FunctionsManual's binary_cross_entropy_double_backward (the derivative in self).
    x_eps = self + _BCE_EPS
    one_m_x_eps = 1 - self + _BCE_EPS
    g = (self * self - 2 * self * target + target) / (x_eps.pow(2) * one_m_x_eps.pow(2))
    return _bce_scale(g * (grad * grad_output), weight, reduction, self.numel())


def _bce_double_backward_grad_output(
    grad: Tensor, self: Tensor, target: Tensor, weight: Tensor | None, reduction: int
) -> Tensor:
    g = (self - target) / ((self + _BCE_EPS) * (1 - self + _BCE_EPS)) * grad
    if weight is not None:
        g = g * weight
    if reduction == REDUCTION_MEAN:
        return g.sum() / self.numel()  # type: ignore[no-any-return]
    if reduction == REDUCTION_SUM:
        return g.sum()  # type: ignore[no-any-return]
    return g


def _bce_double_backward_target(
    grad: Tensor, grad_output: Tensor, self: Tensor, target: Tensor, weight: Tensor | None, reduction: int
) -> Tensor:
    res = -grad * grad_output
    if weight is not None:
        res = res * weight
    # The clamp runs under no_grad in PyTorch: a constant denominator.
    denom = ((1 - self) * self).detach().clamp(min=_BCE_EPS)
    res = res / denom
    return res / target.numel() if reduction == REDUCTION_MEAN else res


def _bce_samples() -> list[SampleInput]:
    p = T((2, 3), 0.05, 0.95)
    t = T((2, 3), 0.0, 1.0, grad=False)
    w = T((2, 3), 0.5, 2.0, grad=False)
    return [
        SampleInput((p, t)),
        SampleInput((p, t, w, REDUCTION_SUM), note="weight sum"),
        SampleInput((p, t, None, REDUCTION_NONE), note="none"),
        SampleInput((p, T((2, 3), 0.0, 1.0)), note="target requires grad"),
        SampleInput(
            (
                T((4,), 0.05, 0.95),
                Lit([0.0, 1.0, 1.0, 0.0], "float64"),
                w.__class__((4,), 0.5, 2.0, grad=False),
                REDUCTION_MEAN,
            ),
            note="hard targets",
        ),
    ]


def _check_bce(self: Array, target: Array, weight: Array | None) -> None:
    if ((self < 0) | (self > 1)).any():
        raise RuntimeError("all elements of input should be between 0 and 1")
    if ((target < 0) | (target > 1)).any():
        raise RuntimeError("all elements of target should be between 0 and 1")


@op(
    derivatives={
        "self": lambda grad, self, target, weight, reduction: binary_cross_entropy_backward(
            grad, self, target, weight, reduction
        ),
        "target": lambda grad, self, target, weight, reduction: _bce_target_backward(
            grad, self, target, weight, reduction
        ),
    },
    method=False,
    function=False,
    samples=_bce_samples,
)
def binary_cross_entropy(
    self: Tensor, target: Tensor, weight: Tensor | None = None, reduction: int = REDUCTION_MEAN
) -> Array:
    _check_bce(self, target, weight)
    with np.errstate(divide="ignore"):
        loss = (target - 1) * np.maximum(np.log1p(-self), -100) - target * np.maximum(np.log(self), -100)
    if weight is not None:
        loss = loss * weight
    return _reduce(np.asarray(loss, self.dtype), reduction)


@op(
    derivatives={
        "grad_output": lambda grad, self, target, weight, reduction: _bce_double_backward_grad_output(
            grad, self, target, weight, reduction
        ),
        "self": lambda grad, grad_output, self, target, weight, reduction: _bce_double_backward(
            grad_output, grad, self, target, weight, reduction
        ),
        "target": lambda grad, grad_output, self, target, weight, reduction: _bce_double_backward_target(
            grad, grad_output, self, target, weight, reduction
        ),
    },
    method=False,
    function=False,
)
def binary_cross_entropy_backward(
    grad_output: Tensor,
    self: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    reduction: int = REDUCTION_MEAN,
) -> Array:
    g = grad_output * (self - target) / np.maximum((1 - self) * self, _BCE_EPS)
    if weight is not None:
        g = g * weight
    if reduction == REDUCTION_MEAN:
        g = g / self.size
    return np.asarray(g, self.dtype)


# --- binary_cross_entropy_with_logits -----------------------------------------------------------
# Not a primitive with its own backward op: the node's formulas are FunctionsManual composites
# (written here with engine ops), so double backward goes through ordinary ops.


def _log_sigmoid(x: Tensor) -> Tensor:
    # log(sigmoid(x)) = -softplus(-x), without overflow.
    from engine.ops.activation import softplus

    return -softplus(-x)  # type: ignore[no-any-return]


def _bcel_backward(
    grad: Tensor,
    self: Tensor,
    target: Tensor,
    weight: Tensor | None,
    pos_weight: Tensor | None,
    reduction: int,
) -> Tensor:
    if pos_weight is not None:
        t = pos_weight * target
        g = (t + 1 - target) * self.sigmoid() - t
    else:
        g = self.sigmoid() - target
    g = g * grad
    if weight is not None:
        g = g * weight
    return g / self.numel() if reduction == REDUCTION_MEAN else g


def _bcel_target_backward(
    grad: Tensor,
    self: Tensor,
    target: Tensor,
    weight: Tensor | None,
    pos_weight: Tensor | None,
    reduction: int,
) -> Tensor:
    if pos_weight is not None:
        g = (_log_sigmoid(-self) - _log_sigmoid(self) * pos_weight) * grad
    else:
        g = -self * grad
    if weight is not None:
        g = g * weight
    return g / target.numel() if reduction == REDUCTION_MEAN else g


def _log_sigmoid_array(x: Array) -> Array:
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


@op(
    derivatives={
        "self": lambda grad, self, target, weight, pos_weight, reduction: _bcel_backward(
            grad, self, target, weight, pos_weight, reduction
        ),
        "target": lambda grad, self, target, weight, pos_weight, reduction: _bcel_target_backward(
            grad, self, target, weight, pos_weight, reduction
        ),
    },
    method=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), T((2, 3), 0.0, 1.0, grad=False))),
        SampleInput(
            (
                T.of(2, 3),
                T((2, 3), 0.0, 1.0, grad=False),
                T((3,), 0.5, 2.0, grad=False),
                T((3,), 0.5, 3.0, grad=False),
            ),
            note="weight pos_weight",
        ),
        SampleInput(
            (T.of(2, 3), T((2, 3), 0.0, 1.0), None, T((3,), 0.5, 3.0, grad=False), REDUCTION_SUM),
            note="sum target grad",
        ),
        SampleInput(
            (
                T((2, 3), -30.0, 30.0),
                T((2, 3), 0.0, 1.0),
                T((2, 3), 0.5, 2.0, grad=False),
                None,
                REDUCTION_NONE,
            ),
            note="none large",
        ),
    ],
)
def binary_cross_entropy_with_logits(
    self: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    pos_weight: Tensor | None = None,
    reduction: int = REDUCTION_MEAN,
) -> Array:
    log_sigmoid = _log_sigmoid_array(self)
    if pos_weight is not None:
        log_sigmoid = log_sigmoid * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * self - log_sigmoid
    if weight is not None:
        loss = loss * weight
    return _reduce(np.asarray(loss, np.result_type(self, target)), reduction)
