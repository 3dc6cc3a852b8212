"""``explain``'s sentence for a debounced or throttled job: ``scheduled``, saying by which policy and until when.

``queue.explain`` reads the database only; the policies live in the task
classes.  :func:`with_policy_reasons` rewrites the ``scheduled`` reason of
a pending job whose kind is debounced or throttled in the queue's registry
(its code and time are unchanged), so ``venturi jobs why`` and the
dashboard say why the job waits.
"""

from __future__ import annotations

from dataclasses import replace

from venturi_sa.declarations.merge_rules import held_sentence
from venturi_sa.merging import timing_of
from venturi_sa.ops.explain import Explanation
from venturi_sa.task import Registry


def with_policy_reasons(explanation: Explanation, registry: Registry) -> Explanation:
    """``explanation`` with its ``scheduled`` reason naming the kind's debounce or throttle, if it has one."""
    if explanation.kind not in registry or not any(r.code == "scheduled" for r in explanation.reasons):
        return explanation
    held_by = timing_of(registry.get(explanation.kind))
    reasons = []
    for reason in explanation.reasons:
        text = held_sentence(held_by, reason.until) if reason.code == "scheduled" and reason.until else None
        reasons.append(replace(reason, text=text) if text is not None else reason)
    return replace(explanation, reasons=reasons)


__all__ = ["with_policy_reasons"]
