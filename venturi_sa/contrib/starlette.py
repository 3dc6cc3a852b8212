"""Starlette and FastAPI: answer venturi's refusals with 409/404 instead of 500.

``FastAPI(exception_handlers=exception_handlers())`` (or
``Starlette(exception_handlers=...)``, or ``app.add_exception_handler`` for each
item) answers ``SignalConflict``, ``TooManySignals`` and ``InvalidTransition``
with 409 and ``JobNotFound`` with 404, each with the JSON body of
:mod:`venturi_sa.contrib.http_errors`.  Needs Starlette (the ``web`` extra, or
FastAPI).  A handler the app registers itself for one of these classes wins if
it comes later in the mapping the app is built with.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from venturi_sa.contrib.http_errors import STATUS_CODES, body, status_code

Handler = Callable[[Any, Exception], Awaitable[Any]]


async def error_response(request: Any, exc: Exception) -> Any:
    """The JSON response for a venturi error (status from :data:`~venturi_sa.contrib.http_errors.STATUS_CODES`)."""
    from starlette.responses import JSONResponse

    return JSONResponse(body(exc), status_code=status_code(exc) or 500)


def exception_handlers() -> dict[Any, Handler]:
    """``{error class: handler}`` for each class of ``STATUS_CODES``, as Starlette and FastAPI take them."""
    return {cls: error_response for cls in STATUS_CODES}


__all__ = ["error_response", "exception_handlers"]
