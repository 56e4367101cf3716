"""Training utilities, TensorFlow's `tf.train`: `Checkpoint`, `CheckpointManager` and
`latest_checkpoint` (object-based checkpoints in a documented, versioned file format that loads
nothing executable; docs/checkpoints.md), and `list_variables`, `load_variable`,
`load_checkpoint` to read a checkpoint's values by path; and the record protocol buffers
(`Example`, `SequenceExample`, `Features`, `Feature`, `BytesList`, ... in example.py)."""
from .checkpoint import (Checkpoint, CheckpointLoadStatus, CheckpointManager,  # noqa: F401
                         latest_checkpoint)
from .example import (BytesList, Example, Feature, FeatureList, FeatureLists,  # noqa: F401
                      Features, FloatList, Int64List, SequenceExample)
from .reader import (CheckpointReader, list_variables, load_checkpoint,  # noqa: F401
                     load_variable)

__all__ = ["Checkpoint", "CheckpointLoadStatus", "CheckpointManager", "CheckpointReader",
           "latest_checkpoint", "list_variables", "load_checkpoint", "load_variable",
           "BytesList", "Example", "Feature", "FeatureList", "FeatureLists", "Features",
           "FloatList", "Int64List", "SequenceExample"]
