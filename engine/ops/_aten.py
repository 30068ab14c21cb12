"""``engine.ops.aten``: PyTorch's operator namespace over the op table, so PyTorch code that names
ops the way dispatch modes and selective checkpointing policies see them runs on the engine::

    if func == torch.ops.aten.mm.default: ...          # a policy's test, unchanged
    create_selective_checkpoint_contexts([torch.ops.aten.mm.default])

Note [Aten overload names]
~~~~~~~~~~~~~~~~~~~~~~~~~~
``torch.ops.aten.add`` is an *overload packet*; ``.Tensor``, ``.Scalar``... are its overloads,
each one schema of native_functions.yaml. The op table names an entry by its overload when the
engine has several (``add.Scalar``); an entry with a plain name is one overload too, usually
``default``, but for a few ops torch's plain call is another one (``add`` is ``aten.add.Tensor``,
``select`` is ``aten.select.int``): ``PLAIN_OVERLOADS``. So ``engine.ops.aten.add.Tensor`` *is*
``engine.ops.add``, the object a dispatch mode or a policy is handed, and compares equal to it.
tests/engine/test_aten_names.py holds every entry's name to torch 2.8's schemas. What the engine
prints for an op stays ``engine.ops.add`` (tests compare messages with torch's ``aten.add.Tensor``
rewritten so).
"""

from __future__ import annotations

from typing import Any

from engine.ops._dispatch import OPS, CompositeOp, Op

__all__ = ["ENGINE_ONLY", "PLAIN_OVERLOADS", "OpOverloadPacket", "aten", "aten_name"]

# Plain-named entries whose torch overload is not ``default`` (Note [Aten overload names]).
PLAIN_OVERLOADS = {
    **dict.fromkeys(("add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_"), "Tensor"),
    **dict.fromkeys(("eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or"), "Tensor"),
    **dict.fromkeys(("select", "transpose", "unbind"), "int"),
    "slice": "Tensor",
    "where": "self",
    # One entry for both overloads: a Python number as the value is torch's .Scalar.
    "searchsorted": "Tensor",
    "bucketize": "Tensor",
}
# Entries of the engine's own, with no aten counterpart.
ENGINE_ONLY = frozenset({"_as_strided_scatter_add"})


def aten_name(entry: Op) -> tuple[str, str]:
    """``(packet, overload)`` of a table entry: ``("add", "Scalar")`` for ``add.Scalar``."""
    base, _, overload = entry.name.partition(".")
    return base, overload or PLAIN_OVERLOADS.get(base, "default")


class OpOverloadPacket:
    """``engine.ops.aten.<name>``: its overloads are the table's entries (``.default`` is
    ``engine.ops.mm``); calling it calls the plain-named entry, as ``torch.ops.aten.mm(...)``."""

    def __init__(self, name: str, overloads: dict[str, Op], call: Op | CompositeOp | None) -> None:
        self._name = name
        self._overloads = overloads
        self._call = call

    def __getattr__(self, overload: str) -> Op:
        try:
            return self.__dict__["_overloads"][overload]  # type: ignore[no-any-return]
        except KeyError:
            raise AttributeError(
                f"The underlying op of 'aten.{self.__dict__['_name']}' has no overload name '{overload}'"
            ) from None

    def overloads(self) -> list[str]:
        return list(self._overloads)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call = self._call if self._call is not None else next(iter(self._overloads.values()))
        return call(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='aten.{self._name}')>"


class _AtenNamespace:
    """``engine.ops.aten``: a packet per op name of the table, made on first use."""

    def __init__(self) -> None:
        self._packets: dict[str, OpOverloadPacket] = {}

    def __getattr__(self, name: str) -> OpOverloadPacket:
        packets = self.__dict__["_packets"]
        if name not in packets:
            overloads = {
                aten_name(entry)[1]: entry
                for key, entry in OPS.items()
                if isinstance(entry, Op) and key not in ENGINE_ONLY and aten_name(entry)[0] == name
            }
            if not overloads:
                raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}'")
            packets[name] = OpOverloadPacket(name, overloads, OPS.get(name))
        return packets[name]  # type: ignore[no-any-return]


aten = _AtenNamespace()
