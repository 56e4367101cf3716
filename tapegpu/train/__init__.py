"""Training utilities, TensorFlow's `tf.train`: `Checkpoint`, `CheckpointManager` and
`latest_checkpoint` (object-based checkpoints in a documented, versioned file format that loads
nothing executable; docs/checkpoints.md), and `list_variables`, `load_variable`,
`load_checkpoint` to read a checkpoint's values by path."""
from .checkpoint import (Checkpoint, CheckpointLoadStatus, CheckpointManager,  # noqa: F401
                         latest_checkpoint)
from .reader import (CheckpointReader, list_variables, load_checkpoint,  # noqa: F401
                     load_variable)

__all__ = ["Checkpoint", "CheckpointLoadStatus", "CheckpointManager", "CheckpointReader",
           "latest_checkpoint", "list_variables", "load_checkpoint", "load_variable"]
