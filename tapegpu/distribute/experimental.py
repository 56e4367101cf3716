"""`tg.distribute.experimental`: MultiWorkerMirroredStrategy's communication options
(TensorFlow's `tf.distribute.experimental` names)."""


class CommunicationImplementation:
    """How MultiWorkerMirroredStrategy's collectives travel (TensorFlow's
    `tf.distribute.experimental.CommunicationImplementation`): AUTO (NCCL for GPU tensors,
    MPI for CPU ones), RING (MPI for everything: GPU tensors go through the host), NCCL
    (GPU tensors by NCCL; refused without a GPU)."""

    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"


class CommunicationOptions:
    """MultiWorkerMirroredStrategy's collective options (TensorFlow's
    `tf.distribute.experimental.CommunicationOptions`): `bytes_per_pack` (the gradients'
    bucket size; 0: tg.distribute's default, 25 MiB), `timeout_seconds` (how long a
    collective waits for the other ranks; None: tg.distribute's default), `implementation`.

        options = tg.distribute.experimental.CommunicationOptions(
            implementation=tg.distribute.experimental.CommunicationImplementation.NCCL)
    """

    def __init__(self, bytes_per_pack=0, timeout_seconds=None,
                 implementation=CommunicationImplementation.AUTO):
        if isinstance(bytes_per_pack, bool) or not isinstance(bytes_per_pack, int) or \
                bytes_per_pack < 0:
            raise ValueError(f"CommunicationOptions: bytes_per_pack must be a non-negative "
                             f"int, got {bytes_per_pack!r}")
        if timeout_seconds is not None and not (
                isinstance(timeout_seconds, (int, float)) and timeout_seconds > 0):
            raise ValueError(f"CommunicationOptions: timeout_seconds must be None or a "
                             f"positive number, got {timeout_seconds!r}")
        if implementation not in ("AUTO", "RING", "NCCL"):
            raise ValueError(f"CommunicationOptions: implementation must be "
                             f"CommunicationImplementation.AUTO, RING or NCCL, got "
                             f"{implementation!r}")
        self.bytes_per_pack = bytes_per_pack
        self.timeout_seconds = timeout_seconds
        self.implementation = implementation


__all__ = ["CommunicationImplementation", "CommunicationOptions"]
