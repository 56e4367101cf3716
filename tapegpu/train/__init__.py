"""Training utilities, TensorFlow's `tf.train`: `Checkpoint`, `CheckpointManager` and
`latest_checkpoint` (object-based checkpoints in a documented, versioned file format that loads
nothing executable; docs/checkpoints.md)."""
from .checkpoint import (Checkpoint, CheckpointLoadStatus, CheckpointManager,  # noqa: F401
                         latest_checkpoint)

__all__ = ["Checkpoint", "CheckpointLoadStatus", "CheckpointManager", "latest_checkpoint"]
