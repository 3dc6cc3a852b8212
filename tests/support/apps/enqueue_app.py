"""Run as a separate process by the dashboard tests: enqueue one ``web_note`` job and print its id.

Usage: ``python enqueue_app.py DSN PREFIX BODY``.  The job and its NOTIFY are
committed together, as an application's request would.
"""

from __future__ import annotations

import sys

import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

from venturi_sa import Queue, Task, make_models


class WebNote(Task):
    KIND = "web_note"

    class Payload(Schema):
        body = fields.String(required=True)

    def run(self, ctx: object) -> None:
        return None


def main(dsn: str, prefix: str, body: str) -> None:
    engine = sa.create_engine(dsn)
    queue = Queue(make_models(prefix), [WebNote])
    with Session(engine) as session, session.begin():
        job = queue.enqueue(session, WebNote(body=body))
        job_id = job.id
    engine.dispose()
    print(job_id)


if __name__ == "__main__":
    main(*sys.argv[1:4])
