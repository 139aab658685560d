"""Signed links to the text page of one conversation.

With API keys configured, the page URL carries a link token: `/c/{conversation_id}?t=TOKEN`. The
token names its tenant, its conversation and an optional expiry, and is signed with HMAC-SHA256 using
the tenant's API key as the secret, so only someone holding that key can mint one, and it opens that
one conversation only. Rotating a tenant's key ends every link minted with the old one (a tenant with
several keys mints with its first and accepts any).

Mint a link in Python:

    from settled.api.page.links import mint_link
    url = mint_link(settings, "c-42", tenant="tenant_a", base_url="https://assist.example", ttl_s=86400)

or on the command line (reads SETTLED_API_KEYS): `settled page-link c-42 --tenant tenant_a --ttl 86400`.
Without API keys the page is open and the link carries no token.
"""

import base64
import binascii
import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from settled.domain.models import IDENTIFIER_PATTERN
from settled.runtime.config import Settings

PREFIX = "sl1."
# Domain separation: a link signature can never be mistaken for any other HMAC made with the key.
_DOMAIN = b"settled-link/1\n"
_TENANT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONVERSATION = re.compile(IDENTIFIER_PATTERN)


class LinkError(ValueError):
    """The token cannot open the page; the message is safe to show to whoever presented it."""


@dataclass(frozen=True)
class Link:
    tenant: str
    conversation_id: str
    expires_at: int | None  # Unix seconds; None: no expiry


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise LinkError("the link is not valid") from None


def _payload(tenant: str, conversation_id: str, expires_at: int | None) -> bytes:
    # Neither a tenant nor a conversation id can hold a newline, so the fields cannot be shifted.
    return f"{tenant}\n{conversation_id}\n{'' if expires_at is None else expires_at}".encode()


def _signature(key: str, payload: bytes) -> bytes:
    return hmac.new(key.encode(), _DOMAIN + payload, hashlib.sha256).digest()


def tenant_keys(keys: Mapping[str, str], tenant: str) -> list[str]:
    """The API keys of `tenant`, in configured order (`keys` maps key -> tenant, as Settings does)."""
    return [key for key, owner in keys.items() if owner == tenant]


def mint_token(key: str, tenant: str, conversation_id: str, expires_at: int | None = None) -> str:
    if not _TENANT.fullmatch(tenant):
        raise ValueError(f"tenant {tenant!r} must be 1-64 of A-Z a-z 0-9 _ -")
    if not _CONVERSATION.fullmatch(conversation_id):
        raise ValueError(f"conversation id {conversation_id!r} must be 1-128 of A-Z a-z 0-9 . _ : -")
    payload = _payload(tenant, conversation_id, expires_at)
    return f"{PREFIX}{_b64(payload)}.{_b64(_signature(key, payload))}"


def is_link_token(text: str | None) -> bool:
    return text is not None and text.startswith(PREFIX)


def verify_token(token: str, keys: Mapping[str, str], now: float | None = None) -> Link:
    """The link a token opens; LinkError if it is malformed, not signed by its tenant's key, or expired."""
    if not is_link_token(token) or token.count(".") != 2:
        raise LinkError("the link is not valid")
    encoded_payload, encoded_signature = token[len(PREFIX) :].split(".")
    payload, signature = _unb64(encoded_payload), _unb64(encoded_signature)
    try:
        tenant, conversation_id, expiry = payload.decode().split("\n")
    except (UnicodeDecodeError, ValueError):
        raise LinkError("the link is not valid") from None
    if not _TENANT.fullmatch(tenant) or not _CONVERSATION.fullmatch(conversation_id):
        raise LinkError("the link is not valid")
    if expiry and not expiry.isdigit():
        raise LinkError("the link is not valid")
    valid = False
    for key in tenant_keys(keys, tenant):  # every key of the tenant, each in constant time
        valid |= hmac.compare_digest(signature, _signature(key, payload))
    if not valid:
        raise LinkError("the link is not valid")
    # Checked only once the signature holds, so an unsigned token learns nothing.
    expires_at = int(expiry) if expiry else None
    if expires_at is not None and (time.time() if now is None else now) >= expires_at:
        raise LinkError("the link has expired")
    return Link(tenant=tenant, conversation_id=conversation_id, expires_at=expires_at)


def mint_link(
    settings: Settings,
    conversation_id: str,
    tenant: str | None = None,
    *,
    base_url: str = "",
    ttl_s: float | None = None,
    now: float | None = None,
) -> str:
    """The URL of the conversation's text page, signed for `tenant` when API keys are configured."""
    if not _CONVERSATION.fullmatch(conversation_id):
        raise ValueError(f"conversation id {conversation_id!r} must be 1-128 of A-Z a-z 0-9 . _ : -")
    url = f"{base_url.rstrip('/')}/c/{quote(conversation_id, safe='')}"
    if not settings.api_keys:
        if tenant is not None:
            raise ValueError("no API keys are configured: there are no tenants to sign a link for")
        return url
    if tenant is None:
        raise ValueError("API keys are configured: name the tenant whose key signs the link")
    keys = tenant_keys(settings.api_keys, tenant)
    if not keys:
        raise ValueError(f"tenant {tenant!r} has no API key in SETTLED_API_KEYS")
    expires_at = None if ttl_s is None else int((time.time() if now is None else now) + ttl_s)
    return f"{url}?t={mint_token(keys[0], tenant, conversation_id, expires_at)}"
