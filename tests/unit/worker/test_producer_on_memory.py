"""The producer's claim loop on the memory backend: free slots, caps, claim order, idle waits."""

from __future__ import annotations

from datetime import timedelta

from support.memory_parts import Parts

from venturi_sa import JobContext, Task
from venturi_sa.storage.params import SoonestParams


class Mail(Task):
    KIND = "mail"

    def run(self, ctx: JobContext) -> None:
        return None


class Report(Task):
    KIND = "report"

    def run(self, ctx: JobContext) -> None:
        return None


def test_a_round_claims_no_more_than_the_free_slots_in_claim_order() -> None:
    parts = Parts([Mail], concurrency=3)
    low = [parts.store.add("mail", priority=2) for _ in range(3)]
    high = parts.store.add("mail", priority=0)
    result = parts.producer.claim_round()
    assert (result.claimed, result.hungry) == (3, True)  # filled its limit: more may be waiting
    assert [r.job.id for r in parts.dispatched] == [high, *low[:2]]
    assert parts.inflight.free() == 0 and len(parts.inflight) == 3
    assert parts.producer.claim_round().claimed == 0  # no free slot: nothing claimed
    assert parts.store.jobs[low[2]].status == "pending"


def test_a_capped_kind_gets_no_more_than_its_room() -> None:
    parts = Parts([Mail, Report], concurrency=5, caps={"report": 1})
    for _ in range(3):
        parts.store.add("report", priority=0)
    mails = [parts.store.add("mail", priority=2) for _ in range(3)]
    parts.producer.claim_round()
    kinds = [r.job.kind for r in parts.dispatched]
    assert kinds == ["report", "mail", "mail", "mail"]
    assert {r.job.id for r in parts.dispatched if r.job.kind == "mail"} == set(mails)
    assert parts.inflight.room() == {"report": 0}
    assert parts.producer.params(parts.inflight.free()).kinds == ["mail"]  # a full cap leaves its kind out


def test_a_freed_slot_of_a_hungry_producer_wakes_it() -> None:
    parts = Parts([Mail], concurrency=2)
    for _ in range(3):
        parts.store.add("mail")
    parts.producer.claim_round()
    assert parts.producer.hungry and not parts.wake.is_set()
    parts.pipeline.handle(parts.dispatched[0])  # the run ends and gives its slot back
    free, kind = parts.freed[-1]
    parts.producer.slot_freed(free, kind)
    assert parts.wake.is_set()
    assert parts.producer.claim_round().claimed == 1


def test_an_idle_producer_waits_for_the_soonest_visible_job() -> None:
    parts = Parts([Mail])
    parts.store.add("mail", visible_at=parts.clock.now + timedelta(seconds=30))
    result = parts.producer.claim_round()
    assert (result.claimed, result.hungry) == (0, False)
    assert parts.store.begin(lambda tx: parts.store.soonest_visible(tx, SoonestParams(kinds=["mail"]))) == 30.0
    parts.clock.advance(seconds=30)
    assert parts.producer.claim_round().claimed == 1


def test_a_paused_kind_is_not_claimed_until_resumed() -> None:
    parts = Parts([Mail, Report])
    mail, report = parts.store.add("mail"), parts.store.add("report")
    parts.store.pause("mail")
    parts.producer.claim_round()
    assert [r.job.id for r in parts.dispatched] == [report]
    parts.store.resume("mail")
    parts.producer.claim_round()
    assert [r.job.id for r in parts.dispatched] == [report, mail]
