"""Optimizers: Keras' `SGD`, `Adam`, `AdamW`, `Adagrad`, `RMSprop` (one fused update per
variable), `Adamax`, `Nadam`, `Adadelta`, `Lion`, `Ftrl` (their `xp` rules), learning-rate
`schedules`, `LossScaleOptimizer` (dynamic loss scaling for mixed precision), and
`LevenbergMarquardt` for least-squares fits of variables."""
from . import levenberg_marquardt, schedules  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .base import Optimizer  # noqa: F401
from .levenberg_marquardt import LevenbergMarquardt, LevenbergMarquardtResult  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .sgd import SGD  # noqa: F401
from .adadelta import Adadelta  # noqa: F401
from .adamax import Adamax  # noqa: F401
from .ftrl import Ftrl  # noqa: F401
from .lion import Lion  # noqa: F401
from .loss_scale import LossScaleOptimizer  # noqa: F401
from .nadam import Nadam  # noqa: F401
