"""``engine.utils.data``: datasets, samplers and a single-process ``DataLoader`` (PyTorch's
``torch.utils.data``). Random orders come from the engine's generators: reproducible with
``engine.manual_seed``, but not torch's orders (see ``sampler.py``)."""

from engine.utils.data._collate import default_collate, default_convert
from engine.utils.data.dataloader import DataLoader
from engine.utils.data.dataset import (
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from engine.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
)

__all__ = [
    "BatchSampler",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "default_collate",
    "default_convert",
    "random_split",
]
