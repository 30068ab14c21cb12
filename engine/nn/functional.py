"""``engine.nn.functional``: the stateless layer functions (PyTorch's ``torch/nn/functional.py``).

Each function reaches the ops PyTorch reaches, so the graph has the same nodes: ``linear`` on a
2-D input is ``addmm(bias, input, weight.t())``, ``layer_norm`` is ``native_layer_norm``,
``cross_entropy`` is ``log_softmax`` then ``nll_loss``, and CPU dropout multiplies by a mask.
The C++ composites PyTorch calls (``linear``, ``nll_loss_nd``, ``cross_entropy_loss``) are
written out here.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from engine import ops
from engine._dtype import dtype as DType  # noqa: N812
from engine._tensor import Tensor
from engine.autograd.grad_mode import no_grad
from engine.ops._dispatch import _scalar_type_name
from engine.trace import emit

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "cross_entropy",
    "dropout",
    "elu",
    "elu_",
    "embedding",
    "gelu",
    "group_norm",
    "instance_norm",
    "layer_norm",
    "leaky_relu",
    "leaky_relu_",
    "linear",
    "log_softmax",
    "max_pool2d",
    "max_pool2d_with_indices",
    "mish",
    "mse_loss",
    "nll_loss",
    "one_hot",
    "relu",
    "relu_",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "softmax",
    "softplus",
    "tanh",
]


# --- linear -------------------------------------------------------------------------------------


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    """``input @ weight.T + bias``, through the op PyTorch's ``at::linear`` picks."""
    if input.dim() == 2 and bias is not None:
        # The fused op: AddmmBackward0 over TBackward0.
        return ops.addmm(bias, input, weight.t())  # type: ignore[no-any-return]
    if bias is not None and input.is_contiguous() and (input.dim() == 3 or bias.dim() == 1):
        return _flatten_nd_linear(input, weight, bias)
    output: Tensor = ops.matmul(input, weight.t())
    if bias is not None:
        output.add_(bias)
    return output


def _flatten_nd_linear(input: Tensor, weight: Tensor, bias: Tensor) -> Tensor:  # noqa: A002
    # Any contiguous input is viewed as a matrix so that the fused addmm applies.
    sizes = tuple(input.shape)
    rows = math.prod(sizes[:-1])
    result: Tensor = ops.addmm(bias, input.reshape(rows, sizes[-1]), weight.t())
    return result.view(*sizes[:-1], result.size(1))


# --- activations --------------------------------------------------------------------------------


def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    return ops.relu_(input) if inplace else ops.relu(input)  # type: ignore[no-any-return]


def relu_(input: Tensor) -> Tensor:  # noqa: A002
    return ops.relu_(input)  # type: ignore[no-any-return]


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    return ops.gelu(input, approximate=approximate)  # type: ignore[no-any-return]


def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    return ops.silu_(input) if inplace else ops.silu(input)  # type: ignore[no-any-return]


def tanh(input: Tensor) -> Tensor:  # noqa: A002
    return input.tanh()  # type: ignore[no-any-return]


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    return input.sigmoid()  # type: ignore[no-any-return]


def _get_softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an "
        "argument.",
        stacklevel=stacklevel,
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: DType | None = None
) -> Tensor:  # noqa: A002
    if dim is None:
        dim = _get_softmax_dim("softmax", input.dim(), _stacklevel)
    return input.softmax(dim) if dtype is None else input.softmax(dim, dtype=dtype)  # type: ignore[no-any-return]


def log_softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: DType | None = None
) -> Tensor:  # noqa: A002
    if dim is None:
        dim = _get_softmax_dim("log_softmax", input.dim(), _stacklevel)
    return input.log_softmax(dim) if dtype is None else input.log_softmax(dim, dtype=dtype)  # type: ignore[no-any-return]


# --- dropout, normalization, embedding ----------------------------------------------------------


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    """Zero each element with probability ``p`` (drawn from the engine's global generator) and
    scale the rest by ``1 / (1 - p)``; the identity when not ``training``."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return ops.dropout_(input, p, training) if inplace else ops.dropout(input, p, training)  # type: ignore[no-any-return]


def layer_norm(
    input: Tensor,  # noqa: A002
    normalized_shape: Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    return ops.layer_norm(input, normalized_shape, weight, bias, eps)  # type: ignore[no-any-return]


def _torch_size(size: Sequence[int]) -> str:
    # torch's messages print the size's repr, torch.Size([...]): see docs/engine.md, "Error messages".
    return f"torch.Size({list(size)})"


def _verify_batch_size(size: Sequence[int]) -> None:
    size_prods = size[0]
    for s in size[2:]:
        size_prods *= s
    if size_prods == 1:
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input size {_torch_size(size)}"
        )


def _verify_spatial_size(size: Sequence[int]) -> None:
    size_prods = 1
    for s in size[2:]:
        size_prods *= s
    if size_prods == 1:
        raise ValueError(
            f"Expected more than 1 spatial element when training, got input size {_torch_size(size)}"
        )


def batch_norm(
    input: Tensor,  # noqa: A002
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each channel (dim 1) by the batch's statistics (training) or the running ones."""
    if training:
        _verify_batch_size(input.size())
    return ops.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, False)  # type: ignore[no-any-return]


def instance_norm(
    input: Tensor,  # noqa: A002
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each channel of each sample by its own statistics."""
    if use_input_stats:
        _verify_spatial_size(input.size())
    return ops.instance_norm(  # type: ignore[no-any-return]
        input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, False
    )


def group_norm(
    input: Tensor,  # noqa: A002
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each group of channels of each sample by its own statistics."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    _verify_batch_size([input.size(0) * input.size(1) // num_groups, num_groups, *input.size()[2:]])
    return ops.group_norm(input, num_groups, weight, bias, eps, False)  # type: ignore[no-any-return]


def embedding(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` picked by the integer ``input``; the row ``padding_idx`` gets no gradient."""
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < weight.size(0), "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -weight.size(0), "Padding_idx must be within num_embeddings"
            padding_idx = weight.size(0) + padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        input = input.contiguous()  # noqa: A001
        _no_grad_embedding_renorm_(weight, input, max_norm, norm_type)
    return ops.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)  # type: ignore[no-any-return]


def _no_grad_embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:  # noqa: A002
    # ATen's embedding_renorm_: rows looked up by `input` whose norm exceeds max_norm are scaled
    # down in place (a non-differentiable in-place update, so it bumps the version).
    with no_grad():
        rows = np.unique(input._data)
        data = weight._data
        norms = np.linalg.norm(data[rows], ord=norm_type, axis=1)
        scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        data[rows] = data[rows] * scale[:, None].astype(data.dtype)
        weight._version_counter.version += 1
        if emit.enabled:
            emit.emit("version_bump", tensor=weight)


# --- losses -------------------------------------------------------------------------------------


def _get_enum(reduction: str) -> int:
    if reduction == "none":
        return 0
    if reduction == "mean":
        return 1
    if reduction == "elementwise_mean":
        warnings.warn(
            "reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.", stacklevel=3
        )
        return 1
    if reduction == "sum":
        return 2
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy_get_string(size_average: bool | None, reduce: bool | None) -> str:
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
        stacklevel=3,
    )
    return ret


def _broadcast_tensors(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    # torch.broadcast_tensors: a tensor already of the broadcast shape is returned as is.
    shape = tuple(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    return (
        a if tuple(a.shape) == shape else a.expand(shape),
        b if tuple(b.shape) == shape else b.expand(shape),
    )


def mse_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    if target.size() != input.size():
        warnings.warn(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}). "
            "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
            "same size.",
            stacklevel=2,
        )
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    expanded_input, expanded_target = _broadcast_tensors(input, target)
    if weight is not None:
        if weight.size() != input.size():
            raise ValueError("Weights and input must have the same size.")
        weighted = (expanded_input - expanded_target).pow(2) * weight
        if reduction == "none":
            return weighted
        if reduction == "sum":
            return weighted.sum()  # type: ignore[no-any-return]
        if reduction == "mean":
            return weighted.sum() / weight.sum()  # type: ignore[no-any-return]
        raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
    return ops.mse_loss(expanded_input, expanded_target, _get_enum(reduction))  # type: ignore[no-any-return]


def nll_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """The negative log likelihood of ``target`` classes under log-probabilities ``input``."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    return _nll_loss_nd(input, target, weight, _get_enum(reduction), ignore_index)


def _nll_loss_nd(
    input: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int
) -> Tensor:  # noqa: A002
    # ATen's nll_loss_nd: (C,) and (N, C) go to nll_loss, (N, C, H, W) to nll_loss2d, and any
    # other rank is viewed as (N, C, 1, -1) for nll_loss2d.
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    if input.dim() != 1 and input.size(0) != target.size(0):
        raise ValueError(
            f"Expected input batch_size ({input.size(0)}) to match target batch_size ({target.size(0)})."
        )
    if weight is not None and weight.requires_grad:
        name = "nll_loss_forward" if input.dim() <= 2 else "nll_loss2d_forward"
        raise RuntimeError(
            f"The function '{name}' is not differentiable with respect to argument 'weight'. This input "
            "cannot have requires_grad True."
        )
    if input.dim() <= 2:
        return ops.nll_loss_forward(input, target, weight, reduction, ignore_index)[0]  # type: ignore[no-any-return]
    if input.dim() == 4:
        return ops.nll_loss2d_forward(input, target, weight, reduction, ignore_index)[0]  # type: ignore[no-any-return]
    n, c = input.size(0), input.size(1)
    out_size = [n, *input.shape[2:]]
    if list(target.shape[1:]) != list(input.shape[2:]):
        raise RuntimeError(f"Expected target size {out_size}, got {target.shape}")
    input = input.contiguous()  # noqa: A001
    target = target.contiguous()
    if input.numel() > 0:
        input = input.view(n, c, 1, -1)  # noqa: A001
    else:
        input = input.view(n, c, 0, 0)  # noqa: A001
    target = target.view(n, 1, -1) if target.numel() > 0 else target.view(n, 0, 0)
    out: Tensor = ops.nll_loss2d_forward(input, target, weight, reduction, ignore_index)[0]
    return out if reduction != 0 else out.view(*out_size)


def cross_entropy(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """``nll_loss(log_softmax(input, class_dim), target)``; ``target`` holds class indices, or
    class probabilities when it has ``input``'s shape. ``label_smoothing`` mixes in the uniform
    distribution."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    red = _get_enum(reduction)
    class_dim = 0 if input.dim() == 1 else 1
    if tuple(input.shape) == tuple(target.shape):
        if not target.is_floating_point():
            raise RuntimeError(
                "Expected floating point type for target with class probabilities, got "
                f"{_scalar_type_name(target.dtype)}"
            )
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        return _cross_entropy_prob_target(input, target, weight, red, label_smoothing)
    if label_smoothing > 0.0:
        if label_smoothing > 1.0:
            raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
        return _cross_entropy_label_smoothing(input, target, weight, red, ignore_index, label_smoothing)
    return _nll_loss_nd(input.log_softmax(class_dim), target, weight, red, ignore_index)


def _weight_view(weight: Tensor, ndim: int, class_dim: int) -> Tensor:
    shape = [1] * ndim
    shape[class_dim] = weight.size(0)
    return weight.view(*shape)


def _cross_entropy_prob_target(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None,
    reduction: int,
    label_smoothing: float,
) -> Tensor:
    class_dim = 0 if input.dim() == 1 else 1
    n_classes = input.size(class_dim)
    if weight is not None and (weight.dim() != 1 or weight.numel() != n_classes):
        raise RuntimeError(
            f"cross_entropy: weight tensor should be defined either for all {n_classes} classes or no "
            f"classes but got weight tensor of shape: {list(weight.shape)}"
        )
    logp: Tensor = input.log_softmax(class_dim)
    if label_smoothing > 0.0:
        if label_smoothing > 1.0:
            raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
        target = ops.add_Scalar(ops.mul_Scalar(target, 1 - label_smoothing), label_smoothing / n_classes)
    prod = logp * target
    if weight is not None:
        prod = prod * (_weight_view(weight, input.dim(), 1) if input.dim() > 1 else weight)
    if reduction == 1:
        if input.numel() == 0:
            return (-prod.sum()).fill_(math.nan)  # type: ignore[no-any-return]
        return ops.div_Scalar(-prod.sum(), input.numel() // n_classes)  # type: ignore[no-any-return]
    if reduction == 2:
        return -prod.sum()  # type: ignore[no-any-return]
    return -prod.sum(class_dim)  # type: ignore[no-any-return]


def _cross_entropy_label_smoothing(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None,
    reduction: int,
    ignore_index: int,
    label_smoothing: float,
) -> Tensor:
    class_dim = 0 if input.dim() == 1 else 1
    logp: Tensor = input.log_softmax(class_dim)
    nllloss = _nll_loss_nd(logp, target, weight, reduction, ignore_index)
    n_classes = logp.size(class_dim)
    if weight is not None:
        smooth_loss = -(logp * _weight_view(weight, logp.dim(), class_dim)).sum(class_dim)
    else:
        smooth_loss = -logp.sum(class_dim)
    ignore_mask: Tensor = target.eq(ignore_index)
    smooth_loss.masked_fill_(ignore_mask, 0.0)
    if reduction == 1:
        if weight is not None:
            # The mean over the weights of the targets that count, like nll_loss's.
            kept = target._data[~ignore_mask._data]
            denominator = Tensor._make(np.asarray(weight._data[kept].sum(), weight._data.dtype))
            ret = smooth_loss.sum() / denominator
        else:
            ret = smooth_loss.sum() / (~ignore_mask).sum()
    elif reduction == 2:
        ret = smooth_loss.sum()
    else:
        ret = smooth_loss
    return ops.mul_Scalar(nllloss, 1 - label_smoothing) + ops.mul_Scalar(ret, label_smoothing / n_classes)  # type: ignore[no-any-return]


# --- convolution and pooling --------------------------------------------------------------------


def conv1d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    """``torch.conv1d``: ``convolution`` (``ConvolutionBackward0``); see engine/ops/conv.py."""
    return ops.conv1d(input, weight, bias, stride, padding, dilation, groups)  # type: ignore[no-any-return]


def conv2d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    """``torch.conv2d``: ``convolution`` (``ConvolutionBackward0``); see engine/ops/conv.py."""
    return ops.conv2d(input, weight, bias, stride, padding, dilation, groups)  # type: ignore[no-any-return]


def max_pool2d_with_indices(
    input: Tensor,  # noqa: A002
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> tuple[Tensor, Tensor]:
    """The max of each window and its flat index in the input plane (``MaxPool2DWithIndicesBackward0``)."""
    return ops.max_pool2d_with_indices(
        input, kernel_size, [] if stride is None else stride, padding, dilation, ceil_mode
    )  # type: ignore[no-any-return]


def max_pool2d(
    input: Tensor,  # noqa: A002
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    if return_indices:
        return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return ops.max_pool2d(input, kernel_size, [] if stride is None else stride, padding, dilation, ceil_mode)  # type: ignore[no-any-return]


def avg_pool2d(
    input: Tensor,  # noqa: A002
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """The mean of each window (``AvgPool2DBackward0``)."""
    return ops.avg_pool2d(  # type: ignore[no-any-return]
        input,
        kernel_size,
        [] if stride is None else stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


def adaptive_avg_pool2d(input: Tensor, output_size: int | Sequence[int | None] | None) -> Tensor:  # noqa: A002
    """Average pooling to a fixed ``output_size`` (``None`` keeps that input size)."""
    sizes = (
        [output_size, output_size]
        if output_size is None or isinstance(output_size, int)
        else list(output_size)
    )
    full = [input.size(i - len(sizes)) if v is None else v for i, v in enumerate(sizes)]
    return ops.adaptive_avg_pool2d(input, full)  # type: ignore[no-any-return]


# --- more activations ---------------------------------------------------------------------------


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    return ops.softplus(input, beta, threshold)  # type: ignore[no-any-return]


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:  # noqa: A002
    return ops.leaky_relu_(input, negative_slope) if inplace else ops.leaky_relu(input, negative_slope)  # type: ignore[no-any-return]


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:  # noqa: A002
    return ops.leaky_relu_(input, negative_slope)  # type: ignore[no-any-return]


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    return ops.elu_(input, alpha) if inplace else ops.elu(input, alpha)  # type: ignore[no-any-return]


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return ops.elu_(input, alpha)  # type: ignore[no-any-return]


def mish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    return ops.mish_(input) if inplace else ops.mish(input)  # type: ignore[no-any-return]


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows of the class indices in ``tensor`` (``num_classes=-1``: max + 1)."""
    return ops.one_hot(tensor, num_classes)  # type: ignore[no-any-return]


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(q k^T * scale + mask) v``, through the backend PyTorch's CPU dispatch picks
    (the flash kernel's single node, or the math composite): see engine/ops/attention.py."""
    return ops.scaled_dot_product_attention(  # type: ignore[no-any-return]
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
    )


# --- binary cross entropy -----------------------------------------------------------------------


def _infer_size(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    out = []
    for i in range(n):
        da = a[i - n + len(a)] if i - n + len(a) >= 0 else 1
        db = b[i - n + len(b)] if i - n + len(b) >= 0 else 1
        if da != db and da != 1 and db != 1:
            raise RuntimeError(
                f"The size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton "
                f"dimension {i}"
            )
        out.append(db if da == 1 else da)
    return tuple(out)


def binary_cross_entropy(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """``-(t log p + (1 - t) log(1 - p))`` for probabilities ``input`` (logs clamped at -100)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    reduction_enum = _get_enum(reduction)
    if target.size() != input.size():
        raise ValueError(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}) is "
            "deprecated. Please ensure they have the same size."
        )
    if weight is not None:
        weight = weight.expand(_infer_size(tuple(target.shape), tuple(weight.shape)))
    return ops.binary_cross_entropy(input, target, weight, reduction_enum)  # type: ignore[no-any-return]


def binary_cross_entropy_with_logits(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits; ``pos_weight``
    weighs the positive term."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    reduction_enum = _get_enum(reduction)
    if target.size() != input.size():
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    return ops.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction_enum)  # type: ignore[no-any-return]
