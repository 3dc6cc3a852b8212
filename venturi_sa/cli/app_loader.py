"""``APP`` on the command line (``venturi worker APP``, ``--app``): import it and return its WorkerApp."""

from __future__ import annotations

import importlib
import os
import sys

from venturi_sa.cli.failures import CliError, CliUsageError
from venturi_sa.errors import VenturiError
from venturi_sa.worker.app import WorkerApp, as_worker_app


def load_app(app: str) -> WorkerApp:
    """Import ``package.module:attribute`` and return it as a :class:`~venturi_sa.WorkerApp`.

    The current directory is importable, as for ``python -m``.  The attribute
    may be a dotted path; it names a Queue, a WorkerApp, an object carrying
    one (a Flask app with the venturi extension) or a function of no
    arguments returning one of those.  Anything else is a one-line error.
    """
    module_name, sep, attr = app.partition(":")
    if not sep or not module_name or not attr:
        raise CliUsageError(f"APP must look like 'package.module:queue', got {app!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import {module_name!r} (from APP {app!r}): {exc}") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CliError(f"module {module_name!r} has no attribute {attr!r} (from APP {app!r})") from None
    try:
        return as_worker_app(target, f"APP {app!r}")
    except (TypeError, VenturiError) as exc:
        raise CliError(str(exc)) from None


__all__ = ["load_app"]
