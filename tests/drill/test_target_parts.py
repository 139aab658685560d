"""The pure parts of `--target-kind`: the kinds file it writes, made-up params, the URL rewrite, and
ground truth from the service's own answers."""

import re
import tomllib

import pytest
from settled.drill.target import (
    NoSample,
    Sign,
    changed_params,
    looks_reversed,
    path_pattern,
    rewrite,
    sample_params,
    truth_from_signs,
)

from settled.domain.kinds import kinds_toml, parse_kinds
from tests.drill.builders import at

TABLE = {
    "description": 'reserve the "big" room',
    "requires_authorization": True,
    "params_schema": {
        "type": "object",
        "required": ["room", "seats"],
        "properties": {
            "room": {"type": "string", "minLength": 1},
            "seats": {"type": "integer", "minimum": 2},
        },
    },
    "dispatch": {"method": "POST", "url": "https://rooms.example:8443/v2/bookings"},
    "lookup": {"url": "https://rooms.example:8443/v2/bookings/by-key/{operation_id}", "authoritative": True},
    "compensate": {"method": "POST", "url": "http://refunds.example/cancel/{business_ref}"},
    "idempotency_header": "Idempotency-Key",
    "timeout_s": 2.5,
    "say": {"confirmed": "Booked {params.room}: {business_ref}."},
}


def test_the_kinds_file_written_reads_back_the_same_and_settled_accepts_it() -> None:
    text = kinds_toml({"room_booking": TABLE})
    assert tomllib.loads(text) == {"kinds": {"room_booking": TABLE}}
    assert parse_kinds(text, "test").get("room_booking") is not None


def test_every_call_is_pointed_at_the_proxy_of_its_origin() -> None:
    proxies = {
        "https://rooms.example:8443": "http://127.0.0.1:9001",
        "http://refunds.example": "http://127.0.0.1:9002",
    }
    moved = rewrite(TABLE, proxies)
    assert moved["dispatch"] == {"method": "POST", "url": "http://127.0.0.1:9001/v2/bookings"}
    assert moved["lookup"]["url"] == "http://127.0.0.1:9001/v2/bookings/by-key/{operation_id}"
    assert moved["lookup"]["authoritative"] is True
    assert moved["compensate"]["url"] == "http://127.0.0.1:9002/cancel/{business_ref}"
    assert TABLE["dispatch"]["url"].startswith("https://rooms")  # the user's table is left alone


def test_a_url_template_matches_its_paths_one_segment_per_placeholder() -> None:
    pattern = path_pattern("http://x/bookings/{business_ref}/cancel")
    assert re.search(pattern, "/bookings/b-7/cancel")
    assert not re.search(pattern, "/bookings/b-7/x/cancel")
    assert not re.search(path_pattern("http://x/bookings"), "/bookings/b-7")


def test_params_are_made_up_from_the_schema_and_c6_changes_one_of_them() -> None:
    params = sample_params(TABLE["params_schema"])
    assert params == {"room": "drill-room", "seats": 2}
    assert changed_params(TABLE["params_schema"], params) == {"room": "drill-room", "seats": 3}
    with pytest.raises(NoSample, match="--params"):
        sample_params(
            {
                "type": "object",
                "required": ["c"],
                "properties": {"c": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            }
        )


def test_a_reversed_record_is_recognised_by_its_status() -> None:
    assert looks_reversed({"id": "b-1", "status": "cancelled"})
    assert not looks_reversed({"id": "b-1", "status": "booked"}) and not looks_reversed(None)


def test_truth_from_signs_dates_a_record_by_its_first_sign_and_its_reversal_by_the_next() -> None:
    signs = [
        Sign(at(90), at(110), "applied", "b-1", {"room": "Ada"}),  # the write's 2xx, seen by the proxy
        Sign(at(100), at(105), "absent"),  # asked before the commit, answered after: not a reversal
        Sign(at(120), at(125), "applied", "b-1"),
        Sign(at(200), at(210), "reversed", "b-1"),
        Sign(at(300), at(305), "applied", None),  # no reference in the answer: the task's record
    ]
    truth = truth_from_signs(signs, [], "test")
    assert len(truth.records) == 1
    record = truth.records[0]
    assert (record.id, record.committed_at, record.cancelled_at, record.payload) == (
        "b-1",
        at(110),
        at(210),
        {"room": "Ada"},
    )


def test_a_record_that_vanishes_after_it_stood_counts_as_reversed_and_two_refs_are_two_records() -> None:
    vanished = truth_from_signs(
        [Sign(at(0), at(10), "applied", "x"), Sign(at(50), at(60), "absent")], [], "t"
    )
    assert vanished.records[0].cancelled_at == at(60)
    two = truth_from_signs(
        [Sign(at(0), at(10), "applied", "x"), Sign(at(20), at(30), "applied", "y")], [], "t"
    )
    assert [r.id for r in two.records] == ["x", "y"]
