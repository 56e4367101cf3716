"""`tg.errors`: TensorFlow's exception classes (`tf.errors`) and their error codes.

`OpError` is the base of the status errors, each with its canonical `error_code`
(`InvalidArgumentError` 3, `NotFoundError` 5, `OutOfRangeError` 11, ...). They can be raised as
in TensorFlow, `tg.errors.NotFoundError(None, None, "no such file")`, or with the message
alone, `tg.errors.NotFoundError("no such file")`; `e.message`, `e.op`, `e.node_def` and
`e.error_code` read them back.

`InvalidArgumentError` is the class tapegpu's ops raise for bad shapes, dtypes and values
(`tg.InvalidArgumentError` is the same class). It is an `OpError` with code 3, as in
TensorFlow, and also a `ValueError` (what Python code expects of a bad argument).
"""

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """The base of TensorFlow's status errors (`tf.errors.OpError`).

    `OpError(node_def, op, message, error_code)` as in TensorFlow, or `OpError(message)`; its
    subclasses take `(node_def, op, message)` or `(message)` and carry their own `error_code`.

    >>> try:
    ...     raise tg.errors.NotFoundError(None, None, "no file named weights.h5")
    ... except tg.errors.OpError as e:
    ...     print(type(e).__name__, e.error_code, e.message)
    NotFoundError 5 no file named weights.h5
    """

    error_code = UNKNOWN

    def __init__(self, *args, **kwargs):
        names = ("node_def", "op", "message", "error_code")
        fields = dict(zip(names, args)) if len(args) != 1 else {"message": args[0]}
        if len(args) > len(names) or set(kwargs) - set(names) or set(fields) & set(kwargs):
            raise TypeError(f"{type(self).__name__}: takes (message) or (node_def, op, message"
                            f"[, error_code]) as in TensorFlow; got {len(args)} positional "
                            f"arguments and keywords {sorted(kwargs)}")
        fields.update(kwargs)
        if "message" not in fields:
            raise TypeError(f"{type(self).__name__}: a message is required: "
                            f"{type(self).__name__}(message) or (node_def, op, message)")
        self.node_def = fields.get("node_def")
        self.op = fields.get("op")
        self.message = str(fields["message"])
        if "error_code" in fields:
            self.error_code = fields["error_code"]
        super().__init__(self.message)

    def __str__(self):
        return self.message

    def __reduce__(self):  # pickles (across threads and processes) with all its fields
        return _rebuild, (type(self), self.node_def, self.op, self.message, self.error_code)


def _rebuild(cls, node_def, op, message, error_code):
    err = cls(node_def, op, message)
    err.error_code = error_code
    return err


def _error(name, code, what):
    cls = type(name, (OpError,), {"error_code": code, "__doc__": f"{what} (`tf.errors.{name}`, "
                                                                  f"error code {code})."})
    cls.__module__ = __name__
    return cls


class InvalidArgumentError(OpError, ValueError):
    """Bad shapes, dtypes or values for an op (`tf.errors.InvalidArgumentError`, error code 3);
    also a `ValueError`.

    >>> try:
    ...     tg.reshape(tg.zeros([2, 3]), [4])
    ... except tg.errors.OpError as e:
    ...     print(type(e).__name__, e.error_code, isinstance(e, ValueError))
    InvalidArgumentError 3 True
    """

    error_code = INVALID_ARGUMENT


CancelledError = _error("CancelledError", CANCELLED, "An operation or step was cancelled")
UnknownError = _error("UnknownError", UNKNOWN, "An error with no better-fitting class")
DeadlineExceededError = _error("DeadlineExceededError", DEADLINE_EXCEEDED,
                               "A deadline expired before the operation completed")
NotFoundError = _error("NotFoundError", NOT_FOUND, "A requested entity (a file, a device, a "
                                                   "name) was not found")
AlreadyExistsError = _error("AlreadyExistsError", ALREADY_EXISTS,
                            "An entity that an operation tried to create already exists")
PermissionDeniedError = _error("PermissionDeniedError", PERMISSION_DENIED,
                               "The caller may not run the operation")
UnauthenticatedError = _error("UnauthenticatedError", UNAUTHENTICATED,
                              "The request has no valid authentication credentials")
ResourceExhaustedError = _error("ResourceExhaustedError", RESOURCE_EXHAUSTED,
                                "A resource (memory, a quota) ran out")
FailedPreconditionError = _error("FailedPreconditionError", FAILED_PRECONDITION,
                                 "The system is not in the state the operation needs (an "
                                 "uninitialized variable)")
AbortedError = _error("AbortedError", ABORTED, "An operation was aborted (a concurrent "
                                               "conflict)")
OutOfRangeError = _error("OutOfRangeError", OUT_OF_RANGE, "An operation went past the valid "
                                                          "range (an iterator at its end)")
UnimplementedError = _error("UnimplementedError", UNIMPLEMENTED,
                            "The operation is not implemented or not supported")
InternalError = _error("InternalError", INTERNAL, "An internal invariant was broken")
UnavailableError = _error("UnavailableError", UNAVAILABLE, "The runtime is unavailable")
DataLossError = _error("DataLossError", DATA_LOSS, "Unrecoverable data loss or corruption")

__all__ = ["OpError", "InvalidArgumentError", "CancelledError", "UnknownError",
           "DeadlineExceededError", "NotFoundError", "AlreadyExistsError",
           "PermissionDeniedError", "UnauthenticatedError", "ResourceExhaustedError",
           "FailedPreconditionError", "AbortedError", "OutOfRangeError", "UnimplementedError",
           "InternalError", "UnavailableError", "DataLossError",
           "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
           "ALREADY_EXISTS", "PERMISSION_DENIED", "UNAUTHENTICATED", "RESOURCE_EXHAUSTED",
           "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
           "UNAVAILABLE", "DATA_LOSS"]
