"""``engine.utils.data`` against torch 2.8.0: batch shapes, dtypes and collation, drop_last,
lengths, samplers and random_split. Random orders come from the engine's generator, so they are
compared with torch's only as sets (and as reproducible under ``engine.manual_seed``)."""

from __future__ import annotations

from collections import namedtuple
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine

pytestmark = pytest.mark.oracle

Pair = namedtuple("Pair", "a b")  # noqa: PYI024 - collate rebuilds namedtuples by their fields


def _describe(batch: Any) -> Any:
    """A batch as types, shapes, dtypes and values, comparable across the two libraries."""
    if hasattr(batch, "shape") and hasattr(batch, "dtype"):
        return (
            "tensor",
            tuple(batch.shape),
            str(batch.dtype).split(".")[-1],
            batch.detach().numpy().tolist(),
        )
    if isinstance(batch, dict):
        return ("dict", {k: _describe(v) for k, v in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return (type(batch).__name__, [_describe(v) for v in batch])
    if isinstance(batch, (list, tuple)):
        return (type(batch).__name__, [_describe(v) for v in batch])
    return (type(batch).__name__, batch)


def _tensor_dataset(lib: ModuleType) -> Any:
    x = lib.from_numpy(np.arange(30, dtype=np.float32).reshape(10, 3))
    y = lib.from_numpy(np.arange(10, dtype=np.int64) % 3)
    return lib.utils.data.TensorDataset(x, y)


@pytest.mark.parametrize("batch_size", [1, 3, 4, 10, 16])
@pytest.mark.parametrize("drop_last", [False, True])
def test_tensor_dataset_batches_match_torch(
    batch_size: int, drop_last: bool, torch_oracle: ModuleType
) -> None:
    def run(lib: ModuleType) -> Any:
        loader = lib.utils.data.DataLoader(_tensor_dataset(lib), batch_size=batch_size, drop_last=drop_last)
        return len(loader), [_describe(b) for b in loader]

    assert run(engine) == run(torch_oracle)


class _Samples:
    """A map-style dataset of mixed samples (numbers, arrays, strings, dicts, namedtuples)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __len__(self) -> int:
        return 5

    def __getitem__(self, i: int) -> Any:
        if self.kind == "dict":
            return {"x": np.full((2,), i, np.float32), "label": i, "w": float(i) / 2, "name": f"s{i}"}
        if self.kind == "tuple":
            return (np.int32(i), np.float64(i) / 3, True, [i, i + 1])
        if self.kind == "namedtuple":
            return Pair(np.ones((2, 2), np.float64) * i, (i, "x"))
        if self.kind == "number":
            return i * 1.5
        if self.kind == "bytes":
            return b"ab"
        return np.arange(3, dtype=np.uint8) + i


@pytest.mark.parametrize("kind", ["dict", "tuple", "namedtuple", "number", "bytes", "array"])
@pytest.mark.parametrize("batch_size", [2, None])
def test_collation_matches_torch(kind: str, batch_size: int | None, torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        return [_describe(b) for b in lib.utils.data.DataLoader(_Samples(kind), batch_size=batch_size)]

    assert run(engine) == run(torch_oracle)


def test_default_collate_of_tensors_and_errors(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        D = lib.utils.data  # noqa: N806
        out: list[Any] = [
            _describe(D.default_collate([lib.ones(2, 3), lib.zeros(2, 3)])),
            _describe(D.default_collate([[lib.ones(1), 2], [lib.zeros(1), 3]])),
            _describe(D.default_convert((np.ones(2), [np.int64(3)]))),
        ]
        for bad in ([object(), object()], [[1, 2], [1]], [np.array(["a"]), np.array(["b"])]):
            with pytest.raises((TypeError, RuntimeError)) as info:
                D.default_collate(bad)
            out.append(
                (type(info.value).__name__, str(info.value).split(" <")[0].replace("torch.", "engine."))
            )
        return out

    ours, theirs = run(engine), run(torch_oracle)
    assert ours == theirs


def test_requires_grad_is_kept_by_collation(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        w = lib.ones(4, 2, requires_grad=True)
        (batch,) = list(lib.utils.data.DataLoader(lib.utils.data.TensorDataset(w * 2), batch_size=4))[0:1]
        return batch[0].requires_grad, type(batch[0].grad_fn).__name__

    assert run(engine) == run(torch_oracle)


def test_shuffle_is_a_permutation_reproducible_with_manual_seed(torch_oracle: ModuleType) -> None:
    def epoch(lib: ModuleType, **kwargs: Any) -> list[int]:
        loader = lib.utils.data.DataLoader(_tensor_dataset(lib), batch_size=4, shuffle=True, **kwargs)
        batches = list(loader)
        assert [tuple(b[0].shape) for b in batches] == [(4, 3), (4, 3), (2, 3)]
        return [int(v) for b in batches for v in (b[0][:, 0] / 3).long().tolist()]

    engine.manual_seed(0)
    first = epoch(engine)
    second = epoch(engine)
    engine.manual_seed(0)
    assert epoch(engine) == first
    assert epoch(engine) == second
    assert first != second  # each epoch draws a new order
    assert sorted(first) == sorted(epoch(torch_oracle)) == list(range(10))
    g = engine.Generator().manual_seed(5)
    with_gen = epoch(engine, generator=g)
    g.manual_seed(5)
    engine.manual_seed(123)  # the global generator does not matter when one is given
    assert epoch(engine, generator=g) == with_gen


def test_samplers_match_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        D = lib.utils.data  # noqa: N806
        seq = D.SequentialSampler(range(7))
        out: list[Any] = [list(seq), len(seq)]
        for drop_last in (False, True):
            bs = D.BatchSampler(seq, 3, drop_last)
            out += [list(bs), len(bs)]
        rs = D.RandomSampler(range(7))
        out += [sorted(rs), len(rs), len(D.RandomSampler(range(7), replacement=True, num_samples=40))]
        out.append(len(list(D.RandomSampler(range(7), replacement=True, num_samples=40))))
        out.append(sorted(set(D.RandomSampler(range(3), num_samples=7))))
        out.append(sorted(D.SubsetRandomSampler([4, 8, 9])))
        loader = D.DataLoader(range(10), batch_sampler=D.BatchSampler(seq, 2, False))
        out.append([_describe(b) for b in loader])
        loader = D.DataLoader(range(10), sampler=[3, 1, 2], batch_size=2)
        out.append([_describe(b) for b in loader])
        return out

    assert run(engine) == run(torch_oracle)


@pytest.mark.parametrize(
    "lengths",
    [[3, 7], [0.3, 0.7], [0.5, 0.5], [1 / 3, 1 / 3, 1 / 3], [0.25, 0.25, 0.25, 0.25], [10], [0.05, 0.95]],
)
def test_random_split_lengths_match_torch(lengths: list[Any], torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        subsets = lib.utils.data.random_split(_tensor_dataset(lib), lengths)
        indices = sorted(i for s in subsets for i in s.indices)
        return [len(s) for s in subsets], indices, [type(s).__name__ for s in subsets]

    ours, theirs = run(engine), run(torch_oracle)
    assert ours == theirs
    assert ours[1] == list(range(10))


def test_random_split_is_reproducible_and_subsets_index_the_dataset() -> None:
    ds = _tensor_dataset(engine)
    a = [
        s.indices
        for s in engine.utils.data.random_split(ds, [4, 6], generator=engine.Generator().manual_seed(1))
    ]
    b = [
        s.indices
        for s in engine.utils.data.random_split(ds, [4, 6], generator=engine.Generator().manual_seed(1))
    ]
    assert a == b
    sub = engine.utils.data.Subset(ds, [7, 2])
    assert len(sub) == 2
    x, y = sub[0]
    assert x.tolist() == [21.0, 22.0, 23.0] and int(y) == 1
    batch = next(iter(engine.utils.data.DataLoader(sub, batch_size=2)))
    assert batch[0].tolist() == [[21.0, 22.0, 23.0], [6.0, 7.0, 8.0]]


def test_errors_and_warnings_match_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[str]:
        D = lib.utils.data  # noqa: N806
        ds = _tensor_dataset(lib)
        out = []
        calls: list[Any] = [
            lambda: D.DataLoader(ds, num_workers=-1),
            lambda: D.DataLoader(ds, timeout=-1),
            lambda: D.DataLoader(ds, prefetch_factor=2),
            lambda: D.DataLoader(ds, persistent_workers=True),
            lambda: D.DataLoader(ds, sampler=[0, 1], shuffle=True),
            lambda: D.DataLoader(ds, batch_sampler=[[0]], batch_size=2),
            lambda: D.DataLoader(ds, batch_size=None, drop_last=True),
            lambda: D.BatchSampler([0], 0, False),
            lambda: D.BatchSampler([0], 2, 1),
            lambda: D.RandomSampler(range(3), num_samples=0),
            lambda: D.random_split(ds, [3, 3]),
            lambda: D.random_split(ds, [1.5, -0.5]),
            lambda: D.TensorDataset(lib.ones(2), lib.ones(3)),
        ]
        for call in calls:
            with pytest.raises((ValueError, TypeError, AssertionError)) as info:
                call()
            out.append(f"{type(info.value).__name__}: {info.value}")
        loader = D.DataLoader(ds)
        with pytest.raises(ValueError) as info2:
            loader.batch_size = 3
        out.append(str(info2.value))
        with pytest.warns(UserWarning) as record:
            D.random_split(range(3), [0.0, 1.0])
        out.append(str(record[0].message))
        return out

    assert run(engine) == run(torch_oracle)


def test_num_workers_is_refused_with_the_reason() -> None:
    with pytest.raises(NotImplementedError, match=r"num_workers=2 is not supported; use num_workers=0"):
        engine.utils.data.DataLoader(_tensor_dataset(engine), num_workers=2)


def test_iterable_dataset_matches_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        class Stream(lib.utils.data.IterableDataset):  # type: ignore[name-defined,misc]
            def __iter__(self) -> Any:
                return iter([np.float32(i) for i in range(7)])

        out = []
        for drop_last in (False, True):
            out.append(
                [_describe(b) for b in lib.utils.data.DataLoader(Stream(), batch_size=3, drop_last=drop_last)]
            )
        with pytest.raises(ValueError) as info:
            lib.utils.data.DataLoader(Stream(), shuffle=True)
        out.append(str(info.value))
        return out

    assert run(engine) == run(torch_oracle)


def test_concat_dataset_matches_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        ds = _tensor_dataset(lib) + _tensor_dataset(lib)
        return (
            len(ds),
            type(ds).__name__,
            _describe(ds[-1]),
            [_describe(b) for b in lib.utils.data.DataLoader(ds, batch_size=8)],
        )

    assert run(engine) == run(torch_oracle)
