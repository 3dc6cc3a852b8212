"""A Flask app with the venturi extension (``flask venturi worker``, ``venturi worker adoption_flask:create_app``).

``ADOPTION_PREFIX`` and ``ADOPTION_URL`` are read when the app is created.
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask, current_app, g
from flask_sqlalchemy import SQLAlchemy

from venturi_sa import JobContext, Queue, Worker, make_models
from venturi_sa.contrib.flask import Venturi

workers: list[Worker] = []


def create_app() -> Flask:
    app = Flask("adoption_flask")
    app.config["SQLALCHEMY_DATABASE_URI"] = os.environ["ADOPTION_URL"]
    db = SQLAlchemy(app)
    queue = Queue(make_models(os.environ["ADOPTION_PREFIX"]))

    @queue.task("in_app")
    def in_app(payload: Any, ctx: JobContext) -> Any:
        g.seen = "g works"  # needs the app context
        workers[-1].stop()
        same_pool = ctx.session.get_bind().pool is db.engine.pool
        return {"app": current_app.name, "g": g.seen, "engine_is_db_engine": same_pool}

    Venturi(app, db, queue, on_start=workers.append, poll_interval=0.1)
    return app
