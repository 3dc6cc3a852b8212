"""Job ids made in bulk: canonical ULIDs of the current millisecond, unique and increasing."""

from __future__ import annotations

import time

import pytest
from ulid import ULID

from venturi_sa.models.job_ids import _ulid_text, new_job_id, new_job_ids


@pytest.mark.parametrize("n", [1, 2, 1000, 5000])
def test_bulk_ids_are_canonical_ulids_of_now_increasing_in_order(n: int) -> None:
    before = time.time()
    ids = new_job_ids(n)
    after = time.time()
    assert len(ids) == n and len(set(ids)) == n and ids == sorted(ids)
    for job_id in ids:
        parsed = ULID.from_str(job_id)
        assert str(parsed) == job_id  # canonical: upper case, 26 digits
        assert before - 0.001 <= parsed.timestamp <= after + 0.001


def test_consecutive_ids_differ_by_one() -> None:
    first, second = (int(ULID.from_str(i)) for i in new_job_ids(2))
    assert second == first + 1


def test_the_encoding_is_ulids_own() -> None:
    for value in (0, 1, 2**128 - 1, 2**80, 2**125 + 12345, int(ULID.from_str(new_job_id()))):
        assert _ulid_text(value) == str(ULID.from_int(value))


def test_no_ids_for_none() -> None:
    assert new_job_ids(0) == []


def test_a_carry_past_the_last_four_digits_re_encodes_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    import venturi_sa.models.job_ids as models

    monkeypatch.setattr(models.os, "urandom", lambda n: (0x1FFFFC).to_bytes(n, "big"))  # low 20 bits: 2**20 - 2
    values = [int(ULID.from_str(i)) for i in new_job_ids(4)]
    assert [v - values[0] for v in values] == [0, 1, 2, 3]
    assert values[2] & (2**20 - 1) == 0  # the third carried into the 22-digit prefix
