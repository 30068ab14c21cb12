"""``engine.Tensor``: a NumPy array plus PyTorch's autograd metadata.

The numeric methods (``sin``, ``sum``, ``__add__`` ...) are not written here: each op is one entry
in the op table (``engine/ops``) and ``engine/ops/_methods.py`` installs it on this class. What
lives here is the autograd state a tensor carries, mirroring PyTorch's ``AutogradMeta``:
``grad_fn`` / ``output_nr`` (its place in the graph), ``requires_grad`` and ``grad`` for leaves,
the shared version counter, view information, and tensor hooks.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import _dtype
from engine._C import _tls
from engine._device import device
from engine._dtype import dtype
from engine.trace import emit

if TYPE_CHECKING:
    from engine.autograd.graph import AccumulateGrad, Node

__all__ = ["Size", "Tensor", "device"]


class Size(tuple[int, ...]):
    """``engine.Size``: a tuple of ints that prints like PyTorch's."""

    def __repr__(self) -> str:
        return f"engine.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


_CPU = device()

# caffe2::TypeMeta names, which PyTorch's messages print for a dtype.
_CPP_TYPE_NAMES = {
    "float32": "float",
    "float64": "double",
    "float16": "c10::Half",
    "int64": "long int",
    "int32": "int",
    "uint8": "unsigned char",
    "bool": "bool",
    "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
}


class _VersionCounter:
    """Shared by a tensor, its views and its ``detach()``es; bumped by every in-place op.

    See Note [Saved variable versions] in engine/autograd/graph.py.
    """

    # A class attribute, not an ``__init__``: every new tensor makes a counter, and most are
    # never bumped; the first ``+= 1`` gives the counter its own value. Calling a class without
    # ``__init__`` costs about a fifth of calling one with it.
    version: int = 0


class CreationMeta:
    """How a view was created; decides whether in-place ops on it are allowed (see
    ``engine.autograd._views.handle_view_on_rebase``)."""

    DEFAULT = "DEFAULT"
    IN_CUSTOM_FUNCTION = "IN_CUSTOM_FUNCTION"
    MULTI_OUTPUT_NODE = "MULTI_OUTPUT_NODE"
    NO_GRAD_MODE = "NO_GRAD_MODE"
    INFERENCE_MODE = "INFERENCE_MODE"


class _ViewInfo:
    """PyTorch's ``DifferentiableViewMeta``: the root base, how the view was made, and the
    version at which its ``grad_fn`` was last (re)built."""

    __slots__ = ("attr_version", "base", "creation_meta", "view_fn")

    def __init__(
        self,
        base: Tensor,
        creation_meta: str,
        attr_version: int,
        view_fn: Callable[[Tensor], Tensor] | None = None,
    ) -> None:
        self.base = base
        self.creation_meta = creation_meta
        self.attr_version = attr_version
        # How to remake the view from (a tensor like) its root base, recorded under view replay
        # (``_force_original_view_tracking``); None: ``as_strided`` of the base remakes it.
        self.view_fn = view_fn


# Note [Undeletable attributes]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch refuses ``del t._grad_fn`` and ``del t._backward_hooks`` (C++ fields) with its own
# messages. A ``__delattr__`` on Tensor could say so, but CPython routes attribute *stores*
# through the same type slot as deletions: with ``__delattr__`` defined, every ``t.x = v`` on a
# tensor takes a generic path about eight times slower than a plain slot store, and making a
# tensor stores fourteen attributes (``_init_tensor``), on the path of every op. So these two
# attributes are properties over the slots ``_grad_fn_`` and ``_backward_hooks_`` whose deleter
# raises PyTorch's message; reading one is a C-level ``attrgetter``, and ``_init_tensor`` sets
# the slots directly. Every other attribute is a plain slot, deleted the ordinary way.


def _undeletable(slot: str, message: str) -> property:
    def fset(self: Tensor, value: Any) -> None:
        setattr(self, slot, value)

    def fdel(self: Tensor) -> None:
        raise RuntimeError(message)

    return property(operator.attrgetter(slot), fset, fdel)


class Tensor:
    """A multi-dimensional array that records the operations applied to it.

    Example::

        >>> import engine
        >>> x = engine.tensor([1.0, 2.0], requires_grad=True)
        >>> y = (x * x).sum()
        >>> y.backward()
        >>> x.grad
        tensor([2., 4.])
    """

    __slots__ = (
        "__dict__",
        "__weakref__",
        "_backward_hooks_",
        "_data",
        "_dtype",
        "_grad",
        "_grad_accumulator",
        "_grad_fn_",
        "_inference",
        "_output_nr",
        "_post_accumulate_grad_hooks",
        "_requires_grad",
        "_retains_grad",
        "_version_counter",
        "_view",
        "_wrapped_number",
    )

    _data: np.ndarray
    _dtype: dtype
    _grad: Tensor | None
    _output_nr: int
    _requires_grad: bool
    _version_counter: _VersionCounter
    _grad_accumulator: weakref.ref[AccumulateGrad] | None
    _view: _ViewInfo | None
    _post_accumulate_grad_hooks: dict[int, Callable[..., Any]] | None
    _retains_grad: bool
    _wrapped_number: bool
    _inference: bool
    # See Note [Undeletable attributes]: the two slots behind ``_grad_fn`` and ``_backward_hooks``.
    _grad_fn_: Node | None
    _backward_hooks_: dict[int, Callable[..., Any]] | None
    if TYPE_CHECKING:
        _grad_fn: Node | None
        _backward_hooks: dict[int, Callable[..., Any]] | None
    else:
        _grad_fn = _undeletable("_grad_fn_", "Deletion of _grad_fn not allowed. Detach tensor instead!")
        _backward_hooks = _undeletable("_backward_hooks_", "Deletion of _backwards_hooks not allowed!")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # ``engine.Tensor([1, 2])`` builds a float tensor from data; ``engine.Tensor(2, 3)``
        # an uninitialised one: PyTorch's legacy constructor.
        if len(args) == 1 and not isinstance(args[0], int):
            data = np.asarray(args[0], dtype=_dtype.get_default_dtype()._np)
        else:
            data = np.empty(tuple(int(a) for a in args), dtype=_dtype.get_default_dtype()._np)
        if kwargs:
            raise TypeError(f"Tensor() got unexpected keyword arguments {sorted(kwargs)}")
        _init_tensor(self, data)

    @classmethod
    def _make(cls, data: np.ndarray, requires_grad: bool = False) -> Tensor:
        """Wrap a NumPy array (taken as is, not copied) as a new tensor."""
        t = object.__new__(cls)
        _init_tensor(t, data)
        if requires_grad:
            t._set_requires_grad(
                True, "Only Tensors of floating point and complex dtype can require gradients"
            )
        return t

    # --- plain attributes -------------------------------------------------------------------

    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def dtype(self) -> dtype:
        return self._dtype

    @property
    def device(self) -> device:
        return _CPU

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    def nelement(self) -> int:
        return int(self._data.size)

    def element_size(self) -> int:
        return self._dtype.itemsize

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return self._dtype.is_complex

    def stride(self, dim: int | None = None) -> Any:
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        return strides if dim is None else strides[_wrap_dim(dim, self._data.ndim)]

    def storage_offset(self) -> int:
        root = _storage_root(self._data)
        return (
            self._data.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        ) // self._data.itemsize

    def data_ptr(self) -> int:
        return int(self._data.__array_interface__["data"][0])

    def untyped_storage_ptr(self) -> int:
        return int(_storage_root(self._data).__array_interface__["data"][0])

    def is_contiguous(self) -> bool:
        return bool(self._data.flags["C_CONTIGUOUS"])

    def item(self) -> Any:
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.reshape(()).item()

    def tolist(self) -> Any:
        return self._data.tolist()

    def numpy(self, *args: Any, force: bool = False) -> np.ndarray:
        if args:
            were = "was" if len(args) == 1 else "were"
            raise TypeError(f"numpy() takes 0 positional arguments but {len(args)} {were} given")
        # torch 2.8 refuses only while grad mode is on: under no_grad / inference_mode it works.
        if self.requires_grad and not force and _tls.grad_enabled:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        # A new ndarray object each call, sharing the tensor's memory (as torch's numpy() does).
        return self._data.view()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return int(self._data.shape[0])

    def __iter__(self) -> Any:
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()).item())

    def __float__(self) -> float:
        if self.requires_grad:
            import warnings

            warnings.warn(
                "Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
                "behavior.\nConsider using tensor.detach() first.",
                UserWarning,
                stacklevel=2,
            )
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._dtype.is_floating_point or self._dtype.is_complex or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __repr__(self) -> str:
        from engine._tensor_str import tensor_repr

        return tensor_repr(self)

    def __format__(self, format_spec: str) -> str:
        # As in PyTorch, a 0-d tensor formats as its Python number: f"{t}" gives "0.35", not
        # "tensor(0.3500)" (gradcheck's messages rely on it).
        if self._data.ndim == 0:
            return format(self._data.item(), format_spec)
        return object.__format__(self, format_spec)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_rebuild, (self._data.copy(), self.requires_grad))

    # --- autograd metadata ------------------------------------------------------------------

    @property
    def requires_grad(self) -> bool:
        # AutogradMeta::requires_grad(): a view requires grad when its base does, even one made
        # in no_grad mode (it has no grad_fn, but in-place ops on it must still be checked).
        return (
            self._requires_grad
            or self._grad_fn_ is not None  # _grad_fn's slot, read directly: it is on every op's path
            or (self._view is not None and self._view.base.requires_grad)
        )

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        # PyTorch's three entry points word the same checks differently (the setter, the method,
        # factories with requires_grad=True); each message is kept.
        if self._grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables."
                + (
                    ""
                    if value
                    else " If you want to use a computed variable in a subgraph that doesn't require "
                    "differentiation use var_no_grad = var.detach()."
                )
            )
        self._set_requires_grad(
            value, "only Tensors of floating point and complex dtype can require gradients"
        )

    @requires_grad.deleter
    def requires_grad(self) -> None:
        # PyTorch's setter receives NULL for a deletion and rejects it as a non-bool.
        raise RuntimeError("requires_grad must be a bool")

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self._grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to "
                    "use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach()."
                )
            return self
        self._set_requires_grad(requires_grad, "only Tensors of floating point dtype can require gradients")
        return self

    def _set_requires_grad(self, requires_grad: bool, dtype_error: str) -> None:
        if requires_grad and not (self._dtype.is_floating_point or self._dtype.is_complex):
            raise RuntimeError(dtype_error)
        self._requires_grad = requires_grad

    @property
    def is_leaf(self) -> bool:
        # Only a view's grad_fn can change on reading it (_view_grad_fn); _grad_fn's slot is read
        # directly, as in requires_grad.
        return self._grad_fn_ is None and (self._view is None or self._view_grad_fn() is None)

    @property
    def grad_fn(self) -> Node | None:
        return self._view_grad_fn() if self._view is not None else self._grad_fn_

    def _view_grad_fn(self) -> Node | None:
        # A view whose base (or a sibling view) was modified in place since its grad_fn was
        # built gets a new one; see Note [View + in-place] in engine/autograd/_views.py.
        if self._view is not None and self._view.attr_version != self._version_counter.version:
            from engine.autograd._views import regenerate_view_grad_fn

            regenerate_view_grad_fn(self)
        return self._grad_fn

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def _version(self) -> int:
        return self._version_counter.version

    @property
    def grad(self) -> Tensor | None:
        if self._grad_fn is not None and not self._retains_grad:
            import warnings

            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
                "mistake, make sure you access the leaf Tensor instead. See "
                "github.com/pytorch/pytorch/pull/30531 for more informations.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    "assigned grad expected to be a Tensor or None but got grad of type "
                    f"{type(value).__name__}"
                )
            if value._dtype is not self._dtype:
                got, want = _CPP_TYPE_NAMES[value._dtype.name], _CPP_TYPE_NAMES[self._dtype.name]
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{got}' to a tensor with dtype '{want}'. "
                    "Please ensure that the gradient and the tensor have the same dtype"
                )
            if value._data.shape != self._data.shape:
                got_size, want_size = list(value._data.shape), list(self._data.shape)
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{got_size}' to a tensor of size "
                    f"'{want_size}'. Please ensure that the gradient and the tensor are the same size"
                )
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        # ``del x.grad``: PyTorch allows it, and it leaves ``x.grad`` None.
        self._grad = None

    @property
    def _base(self) -> Tensor | None:
        return self._view.base if self._view is not None else None

    def _is_view(self) -> bool:
        return self._view is not None

    is_view = _is_view

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def is_inference(self) -> bool:
        return self._inference

    @property
    def data(self) -> Tensor:
        # ``.data`` shares storage but, unlike ``detach()``, not the version counter.
        out = Tensor._make(self._data)
        return out

    @data.setter
    def data(self, new: Tensor) -> None:
        # PyTorch's VariableHooks::set_data: any shape is accepted, any dtype unless this tensor
        # requires grad; a new dtype drops the leaf's AccumulateGrad (graphs built before keep
        # theirs), so that the next graph accumulates into .grad with the new dtype.
        if not isinstance(new, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {_tp_name(new)}")
        if self.requires_grad and not (new._dtype.is_floating_point or new._dtype.is_complex):
            raise RuntimeError(
                "data set to a tensor that requires gradients must be floating point or complex dtype"
            )
        if new._dtype is not self._dtype:
            self._grad_accumulator = None
        self._data = new._data
        self._dtype = new._dtype

    @data.deleter
    def data(self) -> None:
        raise RuntimeError("Deleting tensor data is not allowed. Delete tensor instead!")

    @property
    def T(self) -> Tensor:  # noqa: N802
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:  # noqa: N802
        return self.transpose(-2, -1)

    @property
    def real(self) -> Tensor:
        from engine.ops.complex import real  # the op: a view of the real parts (self for a real tensor)

        return real(self)  # type: ignore[no-any-return]

    if TYPE_CHECKING:
        # The op methods are installed from the op table at import time (one place per op);
        # this tells the type checker they exist.
        def __getattr__(self, name: str) -> Any: ...

        # Operators, likewise installed by engine/ops/_methods.py.
        def __add__(self, other: Any) -> Tensor: ...
        def __radd__(self, other: Any) -> Tensor: ...
        def __iadd__(self, other: Any) -> Tensor: ...
        def __sub__(self, other: Any) -> Tensor: ...
        def __rsub__(self, other: Any) -> Tensor: ...
        def __isub__(self, other: Any) -> Tensor: ...
        def __mul__(self, other: Any) -> Tensor: ...
        def __rmul__(self, other: Any) -> Tensor: ...
        def __imul__(self, other: Any) -> Tensor: ...
        def __truediv__(self, other: Any) -> Tensor: ...
        def __rtruediv__(self, other: Any) -> Tensor: ...
        def __itruediv__(self, other: Any) -> Tensor: ...
        def __pow__(self, other: Any) -> Tensor: ...
        def __rpow__(self, other: Any) -> Tensor: ...
        def __matmul__(self, other: Any) -> Tensor: ...
        def __rmatmul__(self, other: Any) -> Tensor: ...
        def __neg__(self) -> Tensor: ...
        def __pos__(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __invert__(self) -> Tensor: ...
        def __and__(self, other: Any) -> Tensor: ...
        def __or__(self, other: Any) -> Tensor: ...
        def __xor__(self, other: Any) -> Tensor: ...
        def __lt__(self, other: Any) -> Tensor: ...
        def __le__(self, other: Any) -> Tensor: ...
        def __gt__(self, other: Any) -> Tensor: ...
        def __ge__(self, other: Any) -> Tensor: ...
        def __eq__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __ne__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __getitem__(self, index: Any) -> Tensor: ...
        def __setitem__(self, index: Any, value: Any) -> None: ...


def _init_tensor(
    t: Tensor, data: np.ndarray, wrapped_number: bool = False, dtype: _dtype.dtype | None = None
) -> None:
    """Set every slot of a new tensor. ``dtype``: the caller knows ``data``'s dtype already (an op's
    result: the dtype promotion chose, whose ``_np`` the kernel's array has)."""
    t._data = data
    # The common case is one dict lookup; from_numpy also normalises and names unsupported dtypes.
    t._dtype = dtype or _dtype._BY_NUMPY.get(data.dtype) or _dtype.from_numpy(data.dtype)
    t._grad = None
    t._grad_fn_ = None  # the slot behind _grad_fn: Note [Undeletable attributes]
    t._output_nr = 0
    t._requires_grad = False
    t._version_counter = _VersionCounter()
    t._grad_accumulator = None
    t._view = None
    t._backward_hooks_ = None
    t._post_accumulate_grad_hooks = None
    t._retains_grad = False
    t._wrapped_number = wrapped_number
    t._inference = _tls.inference_mode
    # A wrapped Python number (``x * 2.0``) is never shown in a trace (Note [Trace ids and
    # ordering] in engine/trace/_core.py), so it is not reported at all: the recorder would only
    # register it and drop it again at the next event.
    if emit.enabled and not wrapped_number:
        emit.emit("tensor_new", tensor=t)


def _rebuild(data: np.ndarray, requires_grad: bool) -> Tensor:
    return Tensor._make(data, requires_grad)


def _storage_root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _wrap_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


def _tp_name(obj: object) -> str:
    """CPython's ``Py_TYPE(obj)->tp_name``, which C-level messages print: the bare name of a class
    defined in Python, the dotted name of a C type ("numpy.ndarray"; "list" for builtins)."""
    cls = type(obj)
    if cls.__flags__ & (1 << 9) or cls.__module__ == "builtins":  # Py_TPFLAGS_HEAPTYPE
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


def _typename(obj: object) -> str:
    """``torch.typename``: a tensor is named by its dtype's legacy type ("engine.FloatTensor"),
    whatever its class; anything else by its class. Used in nn and optim error messages."""
    if isinstance(obj, Tensor):
        return f"engine.{obj._dtype._legacy_name}"
    module = type(obj).__module__
    name = type(obj).__qualname__
    return name if module == "builtins" else f"{module}.{name}"


# The autograd-facing methods (backward, hooks, retain_grad, casts): see _tensor_autograd.py.
from engine import _tensor_autograd  # noqa: E402, F401
