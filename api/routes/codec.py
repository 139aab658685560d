"""The remote payload codec the Temporal UI (and `temporal` CLI) call to show decrypted payloads.

Protocol: POST /codec/encode and /codec/decode with `{"payloads": [Payload as protobuf JSON]}`.
Behind the same API keys as /v1 when keys are configured; 404 when encryption is off.
"""

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from google.protobuf import json_format
from settled.api.deps import TenantDep
from temporalio.api.common.v1 import Payload

from settled.temporal.codec import EncryptionCodec, EncryptionKeyError

router = APIRouter(prefix="/codec", tags=["codec"])


def _codec(request: Request) -> EncryptionCodec:
    keys = request.app.state.settings.encryption_keys
    if not keys:
        raise HTTPException(404, "payload encryption is not configured (SETTLED_ENCRYPTION_KEYS)")
    codec: EncryptionCodec = request.app.state.codec
    return codec


async def _payloads(request: Request) -> list[Payload]:
    try:
        body = await request.json()
        return [json_format.ParseDict(item, Payload()) for item in body["payloads"]]
    except (ValueError, KeyError, TypeError, json_format.ParseError):
        raise HTTPException(400, 'expected {"payloads": [...]}') from None


def _answer(payloads: list[Payload]) -> dict[str, Any]:
    return {"payloads": [json_format.MessageToDict(payload) for payload in payloads]}


@router.post("/encode")
async def encode(request: Request, _: TenantDep) -> dict[str, Any]:
    codec = _codec(request)
    return _answer(await codec.encode(await _payloads(request)))


@router.post("/decode")
async def decode(request: Request, _: TenantDep) -> dict[str, Any]:
    codec = _codec(request)
    try:
        return _answer(await codec.decode(await _payloads(request)))
    except (EncryptionKeyError, ValueError) as error:
        raise HTTPException(400, f"cannot decode: {error}") from None
