"""`GET /v1/kinds`: what a channel adapter needs to offer the kinds as tools, read from the API."""

import httpx

from settled.domain.kinds import load_kinds
from settled.runtime.stack import Stack


def test_the_kinds_are_listed_as_the_worker_runs_them_and_without_addresses(
    api: httpx.Client, stack: Stack
) -> None:
    response = api.get("/v1/kinds")
    assert response.status_code == 200
    listed = response.json()["kinds"]
    configured = load_kinds(stack.config)
    assert [kind["name"] for kind in listed] == configured.names()
    for kind in listed:
        spec = configured.get(kind["name"])
        assert spec is not None
        assert kind == {
            "name": spec.name,
            "description": spec.description,
            "requires_authorization": spec.requires_authorization,
            "compensable": spec.compensable,
            "params_schema": spec.params_schema,
        }
    assert "127.0.0.1" not in response.text  # where the business services are is not a channel's business
    booking = next(kind for kind in listed if kind["name"] == "room_booking")
    assert (booking["requires_authorization"], booking["compensable"]) == (True, True)
    assert booking["params_schema"]["required"] == ["room", "day"]
