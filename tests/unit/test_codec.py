"""The AES-GCM payload codec: round trip, key rotation, tampering, and clear key errors."""

import base64

import pytest
from temporalio.api.common.v1 import Payload

from settled.temporal.codec import KEY_ID, EncryptionCodec, EncryptionKeyError, new_key, parse_keys

PLAIN = Payload(metadata={"encoding": b"json/plain"}, data=b'{"name": "Ada Lovelace"}')


async def test_round_trip_hides_the_plaintext() -> None:
    codec = EncryptionCodec(parse_keys(f"k1:{new_key()}"))
    [sealed] = await codec.encode([PLAIN])
    assert b"Ada" not in sealed.SerializeToString()
    assert sealed.metadata[KEY_ID] == b"k1"
    assert await codec.decode([sealed]) == [PLAIN]


async def test_rotation_keeps_old_keys_for_decoding() -> None:
    old, new = new_key(), new_key()
    [sealed_old] = await EncryptionCodec(parse_keys(f"k1:{old}")).encode([PLAIN])
    rotated = EncryptionCodec(parse_keys(f"k2:{new},k1:{old}"))
    [sealed_new] = await rotated.encode([PLAIN])
    assert sealed_new.metadata[KEY_ID] == b"k2"
    assert await rotated.decode([sealed_old, sealed_new]) == [PLAIN, PLAIN]
    with pytest.raises(EncryptionKeyError, match="unknown key id 'k2'"):
        await EncryptionCodec(parse_keys(f"k1:{old}")).decode([sealed_new])


async def test_tampering_and_relabelling_are_refused() -> None:
    k1, k2 = new_key(), new_key()
    codec = EncryptionCodec(parse_keys(f"k1:{k1},k2:{k2}"))
    [sealed] = await codec.encode([PLAIN])
    flipped = Payload(metadata=sealed.metadata, data=sealed.data[:-1] + bytes([sealed.data[-1] ^ 1]))
    with pytest.raises(Exception):  # noqa: B017 - cryptography's InvalidTag
        await codec.decode([flipped])
    relabelled = Payload(metadata={**sealed.metadata, KEY_ID: b"k2"}, data=sealed.data)
    with pytest.raises(Exception):  # noqa: B017
        await codec.decode([relabelled])


async def test_unencrypted_payloads_pass_through() -> None:
    codec = EncryptionCodec(parse_keys(f"k1:{new_key()}"))
    assert await codec.decode([PLAIN]) == [PLAIN]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nokey", "KEY_ID:BASE64_KEY"),
        ("k1:not-base64!", "not valid base64"),
        (f"k1:{base64.b64encode(b'short').decode()}", "must be 32 bytes"),
    ],
)
def test_bad_keys_are_named(text: str, message: str) -> None:
    with pytest.raises(EncryptionKeyError, match=message):
        parse_keys(text)
