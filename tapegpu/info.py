"""`python -m tapegpu info`: what tapegpu finds on this machine."""
import platform

import numpy as np


def report():
    """A dict: version, python/numpy, backends and devices, the default device."""
    import tapegpu as tg
    from . import backend
    return {
        "tapegpu": tg.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "devices": [d.name for d in tg.config.list_devices()],
        "default_device": backend.current().device,
    }


def main(argv=None):
    for k, v in report().items():
        print(f"{k:>16}: {v}")
    return 0
