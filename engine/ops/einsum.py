"""``einsum``: a composite, as in PyTorch (``at::native::einsum`` in ``aten/src/ATen/native/Linear.cpp``).

The equation is parsed, every operand is aligned to one layout (diagonals for repeated labels,
``unsqueeze`` for missing ones, then one ``permute``), and the operands are contracted left to
right by ``sumproduct_pair``, which is ``permute -> reshape -> bmm -> view -> permute``. The engine
follows the same steps, so its graph has PyTorch's nodes in PyTorch's order. PyTorch takes a
contraction path from ``opt_einsum`` when that package is installed and there are three operands
or more; without it (and always for one or two operands) it contracts left to right, as here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import composite
from engine.ops._samples import SampleInput, T
from engine.ops.linalg import bmm
from engine.ops.pointwise import mul

_LETTERS = 26
_TOTAL_LABELS = 2 * _LETTERS
_ELLIPSIS = _TOTAL_LABELS


def _subscript(label: str) -> int:
    """``A-Z`` -> 0..25, ``a-z`` -> 26..51 (PyTorch's label_to_subscript)."""
    return ord(label) - ord("A") if label.isupper() else ord(label) - ord("a") + _LETTERS


def _label(s: int) -> str:
    return chr(s + ord("A")) if s < _LETTERS else chr(s - _LETTERS + ord("a"))


def _movedim(t: Tensor, source: int, destination: int) -> Tensor:
    """``movedim`` for one dim, as the permute PyTorch builds for it."""
    n = t.ndim
    src, dst = _wrap_dim(source, n), _wrap_dim(destination, n)
    order = [-1] * n
    order[dst] = src
    rest_src = [d for d in range(n) if d != src]
    rest_dst = [d for d in range(n) if d != dst]
    for s, d in zip(rest_src, rest_dst, strict=True):
        order[d] = s
    return t.permute(order)


def _sumproduct_pair(left: Tensor, right: Tensor, sum_dims: Sequence[int], keepdim: bool) -> Tensor:
    """``(left * right).sum(sum_dims)`` by permute, reshape and ``bmm`` (PyTorch's sumproduct_pair)."""
    if left.ndim != right.ndim:
        raise RuntimeError("number of dimensions must match")
    if not sum_dims:
        return mul(left, right)  # type: ignore[no-any-return]
    dim = left.ndim
    summed = set(sum_dims)
    lro: list[int] = []
    lo: list[int] = []
    ro: list[int] = []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(dim):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in summed:
            if sl and sr:
                if left.shape[i] != right.shape[i]:
                    raise RuntimeError("non-broadcast dimensions must match")
                sum_size *= left.shape[i]
            elif sl:
                left = left.sum(i, True)
            elif sr:
                right = right.sum(i, True)
        elif sl and sr:
            if left.shape[i] != right.shape[i]:
                raise RuntimeError("non-broadcast dimensions must match")
            lro.append(i)
            lro_size *= left.shape[i]
        elif sl:
            lo.append(i)
            lo_size *= left.shape[i]
        else:
            ro.append(i)
            ro_size *= right.shape[i]
    out_size = [left.shape[d] for d in lro] + [left.shape[d] for d in lo] + [1] * len(sum_dims)
    out_size += [right.shape[d] for d in ro]
    lperm = [*lro, *lo, *sum_dims, *ro]
    rperm = [*lro, *sum_dims, *ro, *lo]
    operm = [-1] * len(out_size)
    for i, d in enumerate([*lro, *lo, *sum_dims, *ro]):
        operm[d] = i
    left = left.permute(lperm).reshape(lro_size, lo_size, sum_size)
    right = right.permute(rperm).reshape(lro_size, sum_size, ro_size)
    result = bmm(left, right).view(out_size).permute(operm)
    if not keepdim:
        sizes = [s for i, s in enumerate(result.shape) if i not in summed]
        result = result.view(sizes)
    return result


def _parse_operands(lhs: str, num_ops: int) -> list[list[int]]:
    op_labels: list[list[int]] = [[] for _ in range(num_ops)]
    ell_in_input = False
    curr = 0
    i = 0
    while i < len(lhs):
        c = lhs[i]
        if c == " ":
            pass
        elif c == ".":
            if ell_in_input:
                raise RuntimeError(
                    f"einsum(): found '.' for operand {curr} for which an ellipsis was already found"
                )
            if not (i + 2 < len(lhs) and lhs[i + 1] == "." and lhs[i + 2] == "."):
                raise RuntimeError(f"einsum(): found '.' for operand {curr} that is not part of any ellipsis")
            i += 2
            op_labels[curr].append(_ELLIPSIS)
            ell_in_input = True
        elif c == ",":
            curr += 1
            if curr >= num_ops:
                raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
            ell_in_input = False
        else:
            if not (c.isascii() and c.isalpha()):
                raise RuntimeError(
                    f"einsum(): invalid subscript given at index {i} in the equation string, subscripts "
                    "must be in [a-zA-Z]"
                )
            op_labels[curr].append(_subscript(c))
        i += 1
    if curr != num_ops - 1:
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    return op_labels


def _einsum(equation: str, operands: Sequence[Tensor]) -> Tensor:  # noqa: C901 - PyTorch's one function
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    num_ops = len(operands)
    arrow = equation.find("->")
    lhs = equation if arrow < 0 else equation[:arrow]
    op_labels = _parse_operands(lhs, num_ops)

    label_count = [0] * _TOTAL_LABELS
    ell_num_dim = 0
    for i, (operand, labels) in enumerate(zip(operands, op_labels, strict=True)):
        ndims = operand.ndim
        nlabels = len(labels)
        has_ellipsis = False
        for s in labels:
            if s == _ELLIPSIS:
                nlabels -= 1
                has_ellipsis = True
                ell_num_dim = max(ell_num_dim, ndims - nlabels)
            else:
                label_count[s] += 1
        if not (nlabels <= ndims if has_ellipsis else nlabels == ndims):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({nlabels}) "
                + (
                    "is more than the number of dimensions ("
                    if has_ellipsis
                    else "does not match the number of dimensions ("
                )
                + f"{ndims}) for operand {i}"
                + ("" if has_ellipsis else " and no ellipsis was given")
            )

    # Layout of the aligned operands: output dims, then contraction dims.
    label_perm_index = [-1] * _TOTAL_LABELS
    perm_index = 0
    ell_index = 0
    ell_in_output = False
    if arrow < 0:
        perm_index = ell_num_dim
        ell_in_output = True
        for s in range(_TOTAL_LABELS):
            if label_count[s] == 1:
                label_perm_index[s] = perm_index
                perm_index += 1
    else:
        rhs = equation[arrow + 2 :]
        i = 0
        while i < len(rhs):
            c = rhs[i]
            if c == " ":
                pass
            elif c == ".":
                if ell_in_output:
                    raise RuntimeError(
                        "einsum(): found '.' for output but an ellipsis (...) was already found"
                    )
                if not (i + 2 < len(rhs) and rhs[i + 1] == "." and rhs[i + 2] == "."):
                    raise RuntimeError(
                        "einsum(): found '.' for output that is not part of any ellipsis (...)"
                    )
                i += 2
                ell_index = perm_index
                perm_index += ell_num_dim
                ell_in_output = True
            else:
                if not (c.isascii() and c.isalpha()):
                    raise RuntimeError(
                        f"einsum(): invalid subscript given at index {len(lhs) + 2 + i} in the equation "
                        "string, subscripts must be in [a-zA-Z]"
                    )
                s = _subscript(c)
                if not (label_count[s] > 0 and label_perm_index[s] == -1):
                    why = (
                        "appears more than once in the output"
                        if label_perm_index[s] > -1
                        else "does not appear in the equation for any input operand"
                    )
                    raise RuntimeError(f"einsum(): output subscript {c} {why}")
                label_perm_index[s] = perm_index
                perm_index += 1
            i += 1
    out_num_dim = perm_index
    if not ell_in_output:
        ell_index = perm_index
        perm_index += ell_num_dim
    for s in range(_TOTAL_LABELS):
        if label_count[s] > 0 and label_perm_index[s] == -1:
            label_perm_index[s] = perm_index
            perm_index += 1

    # Align: diagonals for repeated labels, unsqueeze missing ones, permute.
    label_size = [1] * _TOTAL_LABELS
    ell_sizes = [1] * ell_num_dim
    dim_counts = [0] * perm_index
    ops: list[Tensor] = []
    for i, operand in enumerate(operands):
        t = operand
        permutation = [-1] * perm_index
        dim = 0
        for s in op_labels[i]:
            if s == _ELLIPSIS:
                ndim = operand.ndim - (len(op_labels[i]) - 1)
                for j in range(ell_num_dim - ndim, ell_num_dim):
                    if t.shape[dim] != 1:
                        if not (ell_sizes[j] == 1 or ell_sizes[j] == t.shape[dim]):
                            raise RuntimeError(
                                f"einsum(): dimension {dim} covered by ellipsis in operand {i}has size "
                                f"{t.shape[dim]} which does not broadcast with previously seen ellipsis "
                                f"with size {ell_sizes[j]} for the respective dimension"
                            )
                        ell_sizes[j] = t.shape[dim]
                        dim_counts[ell_index + j] += 1
                    permutation[ell_index + j] = dim
                    dim += 1
            elif permutation[label_perm_index[s]] == -1:
                if t.shape[dim] != 1:
                    if not (label_size[s] == 1 or label_size[s] == t.shape[dim]):
                        raise RuntimeError(
                            f"einsum(): subscript {_label(s)} has size {t.shape[dim]} for operand {i} which "
                            f"does not broadcast with previously seen size {label_size[s]}"
                        )
                    label_size[s] = t.shape[dim]
                    dim_counts[label_perm_index[s]] += 1
                permutation[label_perm_index[s]] = dim
                dim += 1
            else:
                prev_dim = permutation[label_perm_index[s]]
                if t.shape[dim] != t.shape[prev_dim]:
                    raise RuntimeError(
                        f"einsum(): subscript {_label(s)} is repeated for operand {i} but the sizes don't "
                        f"match, {t.shape[dim]} != {t.shape[prev_dim]}"
                    )
                t = _movedim(t.diagonal(0, prev_dim, dim), -1, prev_dim)
        for k, val in enumerate(permutation):
            if val == -1:
                t = t.unsqueeze(dim)
                permutation[k] = dim
                dim += 1
        ops.append(t.permute(permutation))

    # Contract left to right.
    while len(ops) > 1:
        a, b = ops[0], ops[1]
        del ops[:2]
        sum_dims: list[int] = []
        a_dims_to_sum: list[int] = []
        b_dims_to_sum: list[int] = []
        for d in range(out_num_dim, perm_index):
            if a.shape[d] != 1 and b.shape[d] != 1:
                dim_counts[d] -= 1
                if dim_counts[d] == 1:
                    sum_dims.append(d)
                    dim_counts[d] = 0
            elif dim_counts[d] == 1:
                if a.shape[d] != 1:
                    a_dims_to_sum.append(d)
                    dim_counts[d] = 0
                elif b.shape[d] != 1:
                    b_dims_to_sum.append(d)
                    dim_counts[d] = 0
        if a_dims_to_sum:
            a = a.sum(a_dims_to_sum, True)
        if b_dims_to_sum:
            b = b.sum(b_dims_to_sum, True)
        ops.insert(0, _sumproduct_pair(a, b, sum_dims, True))

    # Sum out the contraction dims (already of size 1 if there was a contraction).
    if perm_index - out_num_dim > 0:
        if num_ops > 1:
            return ops[0].view(list(ops[0].shape[:out_num_dim]))
        return ops[0].sum(list(range(out_num_dim, perm_index)))  # type: ignore[no-any-return]
    return ops[0]


def _parse_sublist(n: Any) -> str:
    if n is Ellipsis:
        return "..."
    if 0 <= n < _LETTERS:
        return chr(ord("A") + n)
    if _LETTERS <= n < _TOTAL_LABELS:
        return chr(ord("a") + n - _LETTERS)
    raise ValueError("einsum(): subscript in subscript list is not within the valid range [0, 52)")


def _einsum_samples() -> list[SampleInput]:
    return [
        SampleInput(("ij,jk->ik", T.of(2, 3), T.of(3, 4))),
        SampleInput(("ij,kj->ik", T.of(3, 4), T.of(2, 4))),
        SampleInput(("bij,bjk->bik", T.of(2, 3, 4), T.of(2, 4, 5))),
        SampleInput(("i,i->", T.of(4), T.of(4))),
        SampleInput(("i,j->ij", T.of(3), T.of(4))),
        SampleInput(("ii->i", T.of(3, 3))),
        SampleInput(("ii", T.of(3, 3))),
        SampleInput(("ij->ji", T.of(2, 3))),
        SampleInput(("ij->", T.of(2, 3))),
        SampleInput(("ij->j", T.of(2, 3))),
        SampleInput(("...ij,...jk", T.of(2, 2, 3), T.of(3, 4))),
        SampleInput(("bhqd,bhkd->bhqk", T.of(2, 2, 3, 4), T.of(2, 2, 5, 4))),
        SampleInput(("ij,jk,kl->il", T.of(2, 3), T.of(3, 4), T.of(4, 2))),
        SampleInput(("ij,ij->ij", T.of(2, 3), T.of(2, 3))),
        SampleInput(("ij,j->i", T.of(2, 3), T.of(3, grad=False))),
        SampleInput(("ij,jk->ik", T.of(2, 3), T.of(4, 4)), note="size mismatch"),
        SampleInput(("ijk->", T.of(2, 3)), note="too many subscripts"),
        SampleInput(("ij->k", T.of(2, 3)), note="unknown output subscript"),
        SampleInput(("ij,jk", T.of(2, 3)), note="fewer operands"),
    ]


@composite(method=False, samples=_einsum_samples)
def einsum(*args: Any) -> Tensor:
    """``einsum(equation, *operands)``, ``einsum(equation, [operands])`` or the sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``."""
    if len(args) < 2:
        raise ValueError(
            "einsum(): must specify the equation string and at least one operand, "
            "or at least one operand and its subscripts list"
        )
    if isinstance(args[0], Tensor):
        equation = ",".join("".join(_parse_sublist(s) for s in sub) for sub in args[1::2])
        if len(args) % 2 == 1:
            equation += "->" + "".join(_parse_sublist(s) for s in args[-1])
            operands = list(args[:-1:2])
        else:
            operands = list(args[::2])
    else:
        equation, operands = args[0], list(args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    return _einsum(equation, operands)
