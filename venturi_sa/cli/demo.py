"""The quick start's demo tasks: an online shop processing one order.

Each task shows one feature: priorities, a failure that a retry fixes, a
dedup pair that coalesces, a pause that resumes with its carry, and a
delayed job.  ``time.sleep`` stands in for real work.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from marshmallow import Schema, fields
from sqlalchemy.orm import Session

from venturi_sa.declarations.merge_rules import Coalesce, MergeDecision
from venturi_sa.declarations.run_outcomes import Complete, Pause, RunOutcome
from venturi_sa.declarations.task_contexts import JobContext
from venturi_sa.models import JobBase
from venturi_sa.queue import Queue
from venturi_sa.task import Priority, Task

WORK = 0.15  # seconds of pretend work per run
REVIEW_DELAY = timedelta(seconds=2)
REPORT_PAGES = 3


class OrderPayload(Schema):
    order_id = fields.Integer(required=True)


class ChargeCard(Task):
    """Charge the customer's card first: HIGH priority."""

    KIND = "charge_card"
    priority = Priority.HIGH

    class Payload(Schema):
        order_id = fields.Integer(required=True)
        amount_cents = fields.Integer(required=True)

    def run(self, ctx: JobContext) -> RunOutcome:
        time.sleep(WORK)
        return Complete(f"charged ${self.payload['amount_cents'] / 100:.2f} for order {self.payload['order_id']}")


class NotifyWarehouse(Task):
    """Fails on its first run (an API timeout), succeeds on the retry a second later."""

    KIND = "notify_warehouse"
    Payload = OrderPayload

    @classmethod
    def backoff(cls, failure_count: int) -> timedelta:
        return timedelta(seconds=1)

    def run(self, ctx: JobContext) -> RunOutcome:
        time.sleep(WORK)
        if ctx.run_count == 1:
            raise ConnectionError("warehouse API timed out after 5s")
        ctx.set_attachment({"pick_list": ["mug", "tea sampler"], "attempt": ctx.run_count})
        return Complete(f"warehouse accepted order {self.payload['order_id']}")


class SendReceipt(Task):
    """An email: NORMAL priority."""

    KIND = "send_receipt"
    Payload = OrderPayload

    def run(self, ctx: JobContext) -> RunOutcome:
        time.sleep(WORK)
        return Complete(f"receipt for order {self.payload['order_id']} sent")


class RefreshStock(Task):
    """Recount one SKU; two refreshes of a SKU still pending coalesce into one job."""

    KIND = "refresh_stock"
    priority = Priority.LOW

    class Payload(Schema):
        sku = fields.String(required=True)
        sold = fields.Integer(required=True)

    def dedup_key(self) -> str | None:
        return str(self.payload["sku"])

    def merge(self, existing: JobBase) -> MergeDecision:
        return Coalesce({"sku": self.payload["sku"], "sold": existing.payload["sold"] + self.payload["sold"]})

    def run(self, ctx: JobContext) -> RunOutcome:
        time.sleep(WORK)
        return Complete(f"stock of {self.payload['sku']} reduced by {self.payload['sold']}")


class ExportSales(Task):
    """A long export done one page per run: pauses (not a failure) and resumes from its carry."""

    KIND = "export_sales"
    priority = Priority.LOW

    class Carry(Schema):
        pages_done = fields.Integer(required=True)

    def run(self, ctx: JobContext) -> RunOutcome:
        time.sleep(WORK)
        done = (ctx.carry or {}).get("pages_done", 0) + 1
        ctx.carry = {"pages_done": done}
        if done < REPORT_PAGES:
            return Pause(delay=timedelta(milliseconds=300), note=f"exported page {done}/{REPORT_PAGES}")
        return Complete(f"exported {REPORT_PAGES} pages")


class AskForReview(Task):
    """Scheduled for later: eligible only after its delay."""

    KIND = "ask_for_review"
    priority = Priority.LOW
    Payload = OrderPayload

    def run(self, ctx: JobContext) -> RunOutcome:
        return Complete(f"asked the customer of order {self.payload['order_id']} for a review")


TASKS: tuple[type[Task], ...] = (ChargeCard, NotifyWarehouse, SendReceipt, RefreshStock, ExportSales, AskForReview)


def enqueue_order(queue: Queue, session: Session) -> dict[str, Any]:
    """Enqueue the demo mix in the caller's transaction; return the job ids by role.

    Nothing is committed here: the caller's commit publishes every job at once.
    """
    charges = queue.enqueue_many(session, [ChargeCard(order_id=n, amount_cents=1999 + n) for n in (1041, 1042, 1043)])
    flaky = queue.enqueue(session, NotifyWarehouse(order_id=1041))
    receipts = queue.enqueue_many(session, [SendReceipt(order_id=n) for n in (1041, 1042)])
    first = queue.enqueue(session, RefreshStock(sku="MUG-RED", sold=1))
    second = queue.enqueue(session, RefreshStock(sku="MUG-RED", sold=2))
    export = queue.enqueue(session, ExportSales())
    review = queue.enqueue(session, AskForReview(order_id=1041), delay=REVIEW_DELAY)
    return {
        "charges": [j.id for j in charges], "flaky": flaky.id, "receipts": [j.id for j in receipts],
        "stock": first.id, "coalesced": first.id == second.id, "export": export.id, "review": review.id,
    }


def all_ids(roles: dict[str, Any]) -> set[str]:
    ids: set[str] = set()
    for value in roles.values():
        if isinstance(value, list):
            ids.update(value)
        elif isinstance(value, str):
            ids.add(value)
    return ids
