"""A Flask app whose tasks declare limits, for ``jobs why`` and ``limits list`` on every face.

``ADOPTION_PREFIX`` and ``ADOPTION_URL`` are read when the app is created.
Kinds: ``mail_user`` (``key_concurrency = 1`` by ``user:<id>``),
``zip_and_mail`` (``global_concurrency = 2``; the tests make it a fan-in),
``nap`` (sleeps an hour with ``ctx.sleep``), ``await_go`` (waits up to an
hour for signal ``go``) and ``flaky`` (retries in an hour).  The tests run
handlers with a plain ``Worker`` on the app's queue, or claim through storage.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from marshmallow import Schema, fields

from venturi_sa import JobContext, Queue, Retry, Task, make_models
from venturi_sa.contrib.flask import Venturi


class User(Schema):
    user = fields.Integer(load_default=0)


class MailUser(Task):
    KIND = "mail_user"
    Payload = User
    key_concurrency = 1

    def limit_key(self) -> str | None:
        return f"user:{self.payload['user']}"

    def run(self, ctx: JobContext) -> None:
        pass


class ZipAndMail(Task):
    KIND = "zip_and_mail"
    global_concurrency = 2

    def run(self, ctx: JobContext) -> None:
        pass


class Nap(Task):
    KIND = "nap"

    def run(self, ctx: JobContext) -> None:
        ctx.sleep(timedelta(hours=1), name="cool_down")


class AwaitGo(Task):
    KIND = "await_go"

    def run(self, ctx: JobContext) -> Any:
        return ctx.wait_for("go", timeout=timedelta(hours=1))


class Flaky(Task):
    KIND = "flaky"

    def run(self, ctx: JobContext) -> Retry:
        return Retry(delay=timedelta(hours=1), note="smtp down")


TASKS = [MailUser, ZipAndMail, Nap, AwaitGo, Flaky]


def create_app() -> Flask:
    app = Flask("why_flask")
    app.config["SQLALCHEMY_DATABASE_URI"] = os.environ["ADOPTION_URL"]
    db = SQLAlchemy(app)
    Venturi(app, db, Queue(make_models(os.environ["ADOPTION_PREFIX"]), TASKS))
    return app
