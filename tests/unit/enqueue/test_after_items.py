"""after= items and if_parent_dead= are checked before anything reads or writes the database."""

from __future__ import annotations

import pytest

from venturi_sa import InvalidJobId, InvalidOption, make_models
from venturi_sa.models.job_ids import new_job_ids
from venturi_sa.workflows import check_policy, parent_ids


def test_ids_and_jobs_in_order_with_duplicates_dropped() -> None:
    models = make_models("after_items")
    a, b, j1 = new_job_ids(3)
    job = models.Job(id=j1, kind="k", payload={})
    assert parent_ids(models, None, [b, job, b, j1, a]) == (b, j1, a)
    assert parent_ids(models, None, ()) == ()


@pytest.mark.parametrize("item", ["B", "01HZZ\x00", "x" * 10_000, "01jd0q8b6t5zp3y9m4w2xkq7rn",
                                  "81JD0Q8B6T5ZP3Y9M4W2XKQ7RN"])
def test_ids_not_in_ulid_form_are_refused_before_any_sql(item: str) -> None:
    models = make_models("after_items")
    with pytest.raises(InvalidJobId, match="after= item must be a ULID"):
        parent_ids(models, None, [item])
    with pytest.raises(InvalidJobId, match="after= item must be a ULID"):
        parent_ids(models, None, [models.Job(id=item, kind="k", payload={})])


@pytest.mark.parametrize("after, match", [
    ("A", "list"), (b"A", "list"), (42, "list"), ([42], "Job objects or job ids"), ([None], "Job objects"),
])
def test_bad_items_are_refused(after: object, match: str) -> None:
    with pytest.raises(InvalidOption, match=match):
        parent_ids(make_models("after_items"), None, after)


def test_a_job_of_another_queue_or_without_an_id_is_refused() -> None:
    models = make_models("after_items")
    with pytest.raises(InvalidOption, match="belongs to queue 'after_other'"):
        parent_ids(models, None, [make_models("after_other").Job(id="X", kind="k", payload={})])
    with pytest.raises(InvalidOption, match="without an id"):
        parent_ids(models, None, [models.Job(kind="k", payload={})])


def test_the_policy_is_one_of_two() -> None:
    assert (check_policy("cancel"), check_policy("run")) == ("cancel", "run")
    with pytest.raises(InvalidOption, match="'cancel' or 'run'"):
        check_policy("skip")
