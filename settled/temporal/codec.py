"""Payload encryption: what Temporal stores is AES-GCM ciphertext; operators decode through the API.

Keys come from `SETTLED_ENCRYPTION_KEYS="id2:BASE64KEY,id1:BASE64KEY"` (32-byte keys). The first
encrypts; every key decrypts, so a key is rotated by putting a new one first and keeping the old
ones until no history needs them. The key id travels in each payload's metadata. Search attributes
are not payloads and are never encrypted: they hold no personal data.
"""

import base64
import binascii
import dataclasses
import os
from collections.abc import Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12


class EncryptionKeyError(ValueError):
    pass


def parse_keys(text: str) -> dict[str, bytes]:
    """`id:base64,id:base64` -> {id: key}, in the given order (the first encrypts)."""
    keys: dict[str, bytes] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        key_id, sep, encoded = entry.partition(":")
        if not sep or not key_id:
            raise EncryptionKeyError("SETTLED_ENCRYPTION_KEYS: each entry must be KEY_ID:BASE64_KEY")
        try:
            key = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise EncryptionKeyError(f"SETTLED_ENCRYPTION_KEYS: key {key_id!r} is not valid base64") from None
        if len(key) != 32:
            raise EncryptionKeyError(
                f"SETTLED_ENCRYPTION_KEYS: key {key_id!r} must be 32 bytes, not {len(key)}"
            )
        keys[key_id] = key
    return keys


def new_key() -> str:
    return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()


class EncryptionCodec(PayloadCodec):
    def __init__(self, keys: dict[str, bytes]) -> None:
        if not keys:
            raise EncryptionKeyError("no encryption keys")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self._current = next(iter(keys))

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        cipher = self._ciphers[self._current]
        encoded = []
        for payload in payloads:
            nonce = os.urandom(NONCE_BYTES)
            # The key id is authenticated too: a payload cannot be passed off as another key's.
            sealed = cipher.encrypt(nonce, payload.SerializeToString(), self._current.encode())
            metadata = {"encoding": ENCODING, KEY_ID: self._current.encode()}
            encoded.append(Payload(metadata=metadata, data=nonce + sealed))
        return encoded

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                decoded.append(payload)
                continue
            key_id = payload.metadata.get(KEY_ID, b"").decode()
            cipher = self._ciphers.get(key_id)
            if cipher is None:
                raise EncryptionKeyError(f"payload encrypted with unknown key id {key_id!r}")
            nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
            original = Payload()
            original.ParseFromString(cipher.decrypt(nonce, sealed, key_id.encode()))
            decoded.append(original)
        return decoded


def data_converter(keys: dict[str, bytes]) -> DataConverter:
    """The pydantic converter, with encryption when keys are configured."""
    if not keys:
        return pydantic_data_converter
    return dataclasses.replace(pydantic_data_converter, payload_codec=EncryptionCodec(keys))
