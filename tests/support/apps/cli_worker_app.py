"""A tiny application for ``venturi worker`` tests: ``cli_worker_app:queue``.

The queue prefix comes from ``CLI_TEST_PREFIX`` so each test gets its own tables.
"""

from __future__ import annotations

import os

from marshmallow import Schema, fields

from venturi_sa import Complete, Queue, Task, make_models


class Greet(Task):
    KIND = "greet"

    class Payload(Schema):
        name = fields.String(required=True)

    def run(self, ctx):  # type: ignore[no-untyped-def]
        ctx.log.info("greeting %s", self.payload["name"])
        return Complete(f"hello {self.payload['name']}")


queue = Queue(make_models(os.environ.get("CLI_TEST_PREFIX", "cli_app")), [Greet])
not_a_queue = 42
