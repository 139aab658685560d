"""With encryption on, Temporal stores no plaintext params; the codec endpoint decodes with a key."""

import base64
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from temporalio.client import Client

from settled.runtime.stack import Ports, Stack
from settled.temporal.codec import new_key
from settled.temporal.identity import action_workflow_id

SECRET = "Lovelace-Secret-Room"
KEY = "tenant-key-0123456789"
OTHER_KEY = "other-tenant-key-9876"


@pytest.fixture(scope="module")
def encrypted_stack() -> Iterator[Stack]:
    with tempfile.TemporaryDirectory() as folder:
        env = {
            "SETTLED_ENCRYPTION_KEYS": f"k1:{new_key()}",
            "SETTLED_API_KEYS": f"acme:{KEY},globex:{OTHER_KEY}",
        }
        stack = Stack(Path(folder), Ports.free(), sandbox=False, ui=False, extra_env=env)
        # /healthz needs no key; the stack waits on it.
        stack.start()
        yield stack
        stack.stop()


async def test_history_holds_no_plaintext_and_the_codec_decodes_with_a_key(encrypted_stack: Stack) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=encrypted_stack.api_url, timeout=30) as api:
        body = {"conversation_id": "c-enc", "operation_id": "op-enc", "kind": "room_booking",
                "params": {"room": SECRET, "day": "Thursday"}}  # fmt: skip
        created = api.post("/v1/actions", json=body, headers=auth)
        assert created.status_code == 201, created.text
        assert api.get("/v1/actions/op-enc", headers=auth).json()["params"]["room"] == SECRET

        raw_client = await Client.connect(encrypted_stack.temporal_address)  # no codec: what the server holds
        history = await raw_client.get_workflow_handle(action_workflow_id("acme", "op-enc")).fetch_history()
        raw = history.to_json()
        assert SECRET not in raw
        blobs = [base64.b64decode(data) for data in re.findall(r'"data":\s*"([A-Za-z0-9+/=]+)"', raw)]
        assert blobs and not any(SECRET.encode() in blob for blob in blobs)

        started = history.events[0].workflow_execution_started_event_attributes.input.payloads[0]
        payload = {"metadata": {k: base64.b64encode(v).decode() for k, v in started.metadata.items()},
                   "data": base64.b64encode(started.data).decode()}  # fmt: skip
        assert api.post("/codec/decode", json={"payloads": [payload]}).status_code == 401
        decoded = api.post("/codec/decode", json={"payloads": [payload]}, headers=auth)
        assert decoded.status_code == 200
        assert SECRET.encode() in base64.b64decode(decoded.json()["payloads"][0]["data"])


def test_api_keys_scope_every_id_to_its_tenant(encrypted_stack: Stack) -> None:
    with httpx.Client(base_url=encrypted_stack.api_url, timeout=30) as api:
        body = {"conversation_id": "c-t", "operation_id": "op-t", "kind": "room_booking",
                "params": {"room": "Ada", "day": "Thursday"}}  # fmt: skip
        assert api.post("/v1/actions", json=body).status_code == 401
        wrong = api.post("/v1/actions", json=body, headers={"Authorization": "Bearer nope-nope-nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
        mine, theirs = {"Authorization": f"Bearer {KEY}"}, {"Authorization": f"Bearer {OTHER_KEY}"}
        assert api.post("/v1/actions", json=body, headers=mine).status_code == 201
        assert api.get("/v1/actions/op-t", headers=theirs).json()["error"]["code"] == "not_found"
        assert api.post("/v1/actions/op-t/cancel", headers=theirs).status_code == 404
        assert api.get("/v1/conversations/c-t/handoff", headers=theirs).json()["work"] == "idle"
        # The same ids in another tenant are another action, never a conflict.
        assert api.post("/v1/actions", json=body, headers=theirs).status_code == 201
        assert api.get("/v1/conversations/c-t/handoff", headers=mine).json()["work"] == "waiting_for_user"
        assert api.get("/healthz").status_code == 200


def test_without_a_key_the_answer_is_401_even_when_temporal_is_down(tmp_path: Path) -> None:
    env = {"SETTLED_API_KEYS": f"acme:{KEY}", "SETTLED_TEMPORAL_ADDRESS": "127.0.0.1:1"}
    from settled.api.app import create_app

    from settled.runtime.config import Settings

    app = create_app(Settings.from_env(env))
    with TestClient(app) as client:
        assert client.get("/v1/actions/op-1").status_code == 401
        down = client.get("/v1/actions/op-1", headers={"Authorization": f"Bearer {KEY}"})
        assert down.status_code == 503 and down.json()["error"]["code"] == "temporal_unavailable"
