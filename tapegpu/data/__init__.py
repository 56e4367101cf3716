"""`tg.data`: input pipelines as TensorFlow's `tf.data` (dataset.py: sources and
transformations; iterators.py: iteration, prefetch threads, parallel map; structure.py:
nested elements, batching and padding).

>>> ds = tg.data.Dataset.from_tensor_slices(([1.0, 2.0, 3.0], [0, 1, 0])).batch(2)
>>> [(x.numpy().tolist(), y.numpy().tolist()) for x, y in ds]
[([1.0, 2.0], [0, 1]), ([3.0], [0])]
"""
import types as _types

from .dataset import (AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset,
                      DatasetSpec, Options)
from .iterators import Iterator
from .csv import CsvDataset, make_csv_dataset  # noqa: F401
from .records import (FixedLengthRecordDataset, TextLineDataset, TFRecordDataset,  # noqa: F401
                      TFRecordWriter, make_batched_features_dataset)

# tf.data.experimental's names for the same constants
class AutoShardPolicy:
    """`tf.data.experimental.AutoShardPolicy`'s values (accepted in `Options`; tapegpu does not
    shard pipelines by itself: use `Dataset.shard`)."""
    OFF, AUTO, FILE, DATA, HINT = -1, 0, 1, 2, 3


def _cardinality(dataset):
    """`dataset.cardinality()` (`tf.data.experimental.cardinality`, TF's older spelling)."""
    return dataset.cardinality()


experimental = _types.SimpleNamespace(AUTOTUNE=AUTOTUNE,
                                      INFINITE_CARDINALITY=INFINITE_CARDINALITY,
                                      UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY,
                                      AutoShardPolicy=AutoShardPolicy,
                                      cardinality=_cardinality,
                                      CsvDataset=CsvDataset,
                                      make_csv_dataset=make_csv_dataset,
                                      TFRecordWriter=TFRecordWriter,
                                      make_batched_features_dataset=(
                                          make_batched_features_dataset))

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "Dataset", "DatasetSpec",
           "Iterator", "Options", "TFRecordDataset", "TextLineDataset",
           "FixedLengthRecordDataset"]
