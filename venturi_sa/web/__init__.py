"""The venturi dashboard: a server-rendered, live web view of one queue, with guarded actions.

``create_app(engine, prefix)`` returns an ASGI (Starlette) application to
mount in FastAPI/Starlette or wrap for WSGI; ``venturi web`` runs it alone.
Needs the ``web`` extra: ``pip install 'venturi[web]'``.  See docs/dashboard.md.
"""

from __future__ import annotations

from venturi_sa.web.actions import BUILTIN_ACTIONS, Action, ActionContext
from venturi_sa.web.app import Dashboard, Page
from venturi_sa.web.asgi import create_app

__all__ = ["BUILTIN_ACTIONS", "Action", "ActionContext", "Dashboard", "Page", "create_app"]
