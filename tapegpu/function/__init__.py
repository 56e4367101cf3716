"""`tg.function`: tracing Python functions into graphs that replay as flat array schedules
(trace.py records, graph.py optimizes and replays, api.py caches per signature).
See docs/function.md."""
from .api import ConcreteFunction, Function, InputSignatureError, TensorSpec, function  # noqa: F401
from .trace import OperatorNotAllowedInGraphError, init_scope, print_  # noqa: F401
