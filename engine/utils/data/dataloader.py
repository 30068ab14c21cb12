"""``DataLoader`` (PyTorch's ``torch/utils/data/dataloader.py``), single-process only.

A DataLoader combines a dataset with a sampler: each ``iter(loader)`` starts an epoch, reads the
indices the (batch) sampler yields, fetches the samples and collates them into a batch.
``shuffle=True`` uses a ``RandomSampler`` fed by the engine's generators (the global one, or
``generator=``): the order is reproducible with ``engine.manual_seed`` but is not torch's order
for the same seed. Batch shapes, dtypes and collation are torch's.

``num_workers`` must be 0: loading happens in the main process, between training steps.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from engine.random import Generator
from engine.utils.data._collate import default_collate, default_convert
from engine.utils.data.dataset import Dataset, IterableDataset
from engine.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, _random_seed

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)


class _InfiniteConstantSampler(Sampler[None]):
    """The sampler of an IterableDataset: the dataset decides what comes next."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches of ``batch_size`` (``None``: one sample at a time,
    not collated but converted)."""

    __initialized = False

    def __init__(
        self,
        dataset: Dataset[T_co],
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler[Any] | Iterable[Any] | None = None,
        batch_sampler: Sampler[list[Any]] | Iterable[list[Any]] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing."
            )
        if num_workers > 0:
            raise NotImplementedError(
                f"engine.utils.data.DataLoader: num_workers={num_workers} is not supported; use "
                "num_workers=0. The engine loads data in the main process only: it has no worker "
                "processes (torch's shared-memory tensors and worker machinery are not re-done here)."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if persistent_workers:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None:
            raise ValueError(
                "multiprocessing_context can only be used with multi-process loading (num_workers > 0), "
                f"but got num_workers={num_workers}"
            )
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            if shuffle not in {False, None}:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                    f"shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified sampler option, but got "
                    f"sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified batch_sampler option, but got "
                    f"batch_sampler={batch_sampler}"
                )
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                    "drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
            )
        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
            else:
                sampler = SequentialSampler(dataset)  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)  # type: ignore[arg-type]
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.__initialized = True

    def __setattr__(self, attr: str, val: Any) -> None:
        if self.__initialized and attr in (
            "batch_size",
            "batch_sampler",
            "sampler",
            "drop_last",
            "dataset",
            "persistent_workers",
        ):
            raise ValueError(
                f"{attr} attribute should not be set after {self.__class__.__name__} is initialized"
            )
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> _SingleProcessDataLoaderIter:
        return _SingleProcessDataLoaderIter(self)

    def __len__(self) -> int:
        if self._is_iterable:
            length: int = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)


class _SingleProcessDataLoaderIter:
    """One epoch: index batches from the sampler, samples from the dataset, then collate."""

    def __init__(self, loader: DataLoader[Any]) -> None:
        self._dataset = loader.dataset
        self._is_iterable = loader._is_iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._batch_size = loader.batch_size
        self._index_sampler = loader._index_sampler
        self._collate_fn = loader.collate_fn
        if loader.pin_memory and not loader.pin_memory_device:
            warnings.warn(
                "'pin_memory' argument is set as true but no accelerator is found, then device pinned "
                "memory won't be used.",
                stacklevel=3,
            )
        self._sampler_iter = iter(self._index_sampler)
        # torch draws the workers' base seed here, every epoch, from the loader's generator (or
        # the global one); drawing it too keeps the generators' streams advancing as torch's do.
        self._base_seed = _random_seed(loader.generator)
        self._dataset_iter = iter(self._dataset) if self._is_iterable else None  # type: ignore[call-overload]
        self._ended = False
        self._num_yielded = 0

    def __iter__(self) -> _SingleProcessDataLoaderIter:
        return self

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __next__(self) -> Any:
        index = next(self._sampler_iter)
        if self._is_iterable:
            data = self._fetch_iterable(index)
        elif self._auto_collation:
            getitems = getattr(self._dataset, "__getitems__", None)
            if getitems:
                samples = getitems(index)
            else:
                samples = [self._dataset[idx] for idx in index]
            data = self._collate_fn(samples)
        else:
            data = self._collate_fn(self._dataset[index])
        self._num_yielded += 1
        return data

    def _fetch_iterable(self, index: Any) -> Any:
        assert self._dataset_iter is not None
        if self._ended:
            raise StopIteration
        if self._auto_collation:
            samples = []
            for _ in index:
                try:
                    samples.append(next(self._dataset_iter))
                except StopIteration:
                    self._ended = True
                    break
            if len(samples) == 0 or (self._drop_last and len(samples) < len(index)):
                raise StopIteration
            return self._collate_fn(samples)
        return self._collate_fn(next(self._dataset_iter))
