"""The HTTP status of the venturi errors a view can meet acting on a job, for the framework helpers.

``queue.signal``, ``queue.requeue``, ``queue.cancel``, ``queue.get_job`` ...
raise these when the request cannot be served as asked; unhandled, a web
framework answers 500.  :func:`venturi_sa.contrib.flask.register_error_handlers`
and :func:`venturi_sa.contrib.starlette.exception_handlers` answer them with the
status below and a JSON body ``{"error": "<class name>", "detail": "<message>"}``.
Each error is raised before anything is written, so the request's transaction
has nothing of the refused action to roll back.
"""

from __future__ import annotations

from typing import Any

from venturi_sa.errors import InvalidTransition, JobNotFound, SignalConflict, TooManySignals, VenturiError

STATUS_CODES: dict[type[VenturiError], int] = {
    SignalConflict: 409,     # another payload is stored under that signal name: the first one wins
    TooManySignals: 409,     # the job's signal cap is reached: no further signal is kept for it
    InvalidTransition: 409,  # the job's status forbids the action (it ended, its wait timed out, ...)
    JobNotFound: 404,        # no such job (an id that is not a ULID too)
}
"""Error class → HTTP status; a subclass takes the status of its nearest listed class."""


def status_code(exc: BaseException) -> int | None:
    """The status for ``exc``: that of the nearest class of its MRO in :data:`STATUS_CODES`, else None."""
    for cls in type(exc).__mro__:
        if cls in STATUS_CODES:
            return STATUS_CODES[cls]
    return None


def body(exc: BaseException) -> dict[str, Any]:
    """The JSON body answered for ``exc``: its class name and its message."""
    return {"error": type(exc).__name__, "detail": str(exc)}
