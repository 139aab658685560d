"""Signed, conversation-scoped credentials: one HMAC-SHA256 scheme, two uses.

A token names a tenant, one conversation and an expiry, and is signed with the tenant's API key, so
only someone holding that key can mint one, and rotating the key ends every token signed with it (a
tenant with several keys mints with its first and accepts any). Each use signs under a tag of its
own, so a token of one use can never pass as the other:

- a **conversation token** (`sc1.`): a bearer credential for a browser agent, in place of the API
  key, valid on its own conversation's routes only and for at most 24 hours. The team's own server
  mints it for a person whose session owns the conversation:

      from settled.tokens import mint_conversation_token
      token = mint_conversation_token(api_key, "tenant_a", "c-42", ttl_s=3600)

  (`settled token c-42 --tenant tenant_a --ttl 3600` on the command line; `mintConversationToken`
  of `@settled/client` on a Node server);
- a **page link** (`sl1.`): opens the text page of one conversation (`settled.api.page.links`).

The token is `PREFIX + base64url(tenant \\n conversation_id \\n expires_at) + "." +
base64url(HMAC-SHA256(key, TAG + payload))`, base64url without padding, `expires_at` in Unix seconds
(empty: no expiry, page links only). Standard library only: the light install can mint.
"""

import base64
import binascii
import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from settled.domain.models import IDENTIFIER_PATTERN

# A conversation token lives at most this long: a browser holds it, so a leaked one ends soon.
CONVERSATION_TOKEN_MAX_TTL_S = 86_400
# Clocks of the minting server and the API may differ by this much.
_CLOCK_SKEW_S = 60
_TENANT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONVERSATION = re.compile(IDENTIFIER_PATTERN)


@dataclass(frozen=True)
class TokenUse:
    prefix: str
    tag: bytes  # domain separation: a signature of one use is never valid for another
    noun: str  # how refusals name it to whoever presented it
    max_ttl_s: int | None  # None: the expiry is optional and unbounded


PAGE_LINK = TokenUse("sl1.", b"settled-link/1\n", "link", None)
CONVERSATION_TOKEN = TokenUse(
    "sc1.", b"settled-conversation-token/1\n", "conversation token", CONVERSATION_TOKEN_MAX_TTL_S
)


class TokenError(ValueError):
    """The token grants nothing; the message is safe to show to whoever presented it."""


@dataclass(frozen=True)
class Grant:
    """What a valid token opens."""

    tenant: str
    conversation_id: str
    expires_at: int | None  # Unix seconds; None: no expiry


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str, use: TokenUse) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise TokenError(f"the {use.noun} is not valid") from None


def _payload(tenant: str, conversation_id: str, expires_at: int | None) -> bytes:
    # Neither a tenant nor a conversation id can hold a newline, so the fields cannot be shifted.
    return f"{tenant}\n{conversation_id}\n{'' if expires_at is None else expires_at}".encode()


def _signature(use: TokenUse, key: str, payload: bytes) -> bytes:
    return hmac.new(key.encode(), use.tag + payload, hashlib.sha256).digest()


def _now(now: float | None) -> float:
    return time.time() if now is None else now


def tenant_keys(keys: Mapping[str, str], tenant: str) -> list[str]:
    """The API keys of `tenant`, in configured order (`keys` maps key -> tenant, as Settings does)."""
    return [key for key, owner in keys.items() if owner == tenant]


def signing_key(keys: Mapping[str, str], tenant: str | None) -> str | None:
    """The key that signs for `tenant` (its first), or None when no API keys are configured."""
    if not keys:
        if tenant is not None:
            raise ValueError("no API keys are configured: there are no tenants to sign for")
        return None
    if tenant is None:
        raise ValueError("API keys are configured: name the tenant whose key signs")
    owned = tenant_keys(keys, tenant)
    if not owned:
        raise ValueError(f"tenant {tenant!r} has no API key in SETTLED_API_KEYS")
    return owned[0]


def sign(use: TokenUse, key: str, tenant: str, conversation_id: str, expires_at: int | None) -> str:
    """A token of `use` for one conversation of `tenant`, signed with `key` (one of the tenant's)."""
    if not _TENANT.fullmatch(tenant):
        raise ValueError(f"tenant {tenant!r} must be 1-64 of A-Z a-z 0-9 _ -")
    if not _CONVERSATION.fullmatch(conversation_id):
        raise ValueError(f"conversation id {conversation_id!r} must be 1-128 of A-Z a-z 0-9 . _ : -")
    if use.max_ttl_s is not None and expires_at is None:
        raise ValueError(f"a {use.noun} needs an expiry")
    payload = _payload(tenant, conversation_id, expires_at)
    return f"{use.prefix}{_b64(payload)}.{_b64(_signature(use, key, payload))}"


def mint_conversation_token(
    key: str, tenant: str, conversation_id: str, *, ttl_s: float = 3600, now: float | None = None
) -> str:
    """A bearer token for `conversation_id` of `tenant`, in place of `key` (the tenant's API key),
    for `ttl_s` seconds (at most 24 hours). Mint it on your server; give only the token to a browser."""
    if not 0 < ttl_s <= CONVERSATION_TOKEN_MAX_TTL_S:
        raise ValueError(f"ttl_s must be more than 0 and at most {CONVERSATION_TOKEN_MAX_TTL_S} s")
    expires_at = int(_now(now) + ttl_s)
    return sign(CONVERSATION_TOKEN, key, tenant, conversation_id, expires_at)


def is_token_of(use: TokenUse, text: str | None) -> bool:
    return text is not None and text.startswith(use.prefix)


def verify(use: TokenUse, token: str, keys: Mapping[str, str], now: float | None = None) -> Grant:
    """What a token of `use` opens; TokenError if it is malformed, not signed by a key of its tenant,
    expired, or (for a use with a bounded life) set to expire beyond that bound."""
    invalid = TokenError(f"the {use.noun} is not valid")
    if not is_token_of(use, token) or token.count(".") != 2:
        raise invalid
    encoded_payload, encoded_signature = token[len(use.prefix) :].split(".")
    payload, signature = _unb64(encoded_payload, use), _unb64(encoded_signature, use)
    try:
        tenant, conversation_id, expiry = payload.decode().split("\n")
    except (UnicodeDecodeError, ValueError):
        raise invalid from None
    if not _TENANT.fullmatch(tenant) or not _CONVERSATION.fullmatch(conversation_id):
        raise invalid
    if (expiry and not expiry.isdigit()) or (use.max_ttl_s is not None and not expiry):
        raise invalid
    valid = False
    for key in tenant_keys(keys, tenant):  # every key of the tenant, each in constant time
        valid |= hmac.compare_digest(signature, _signature(use, key, payload))
    if not valid:
        raise invalid
    # Checked only once the signature holds, so an unsigned token learns nothing.
    expires_at = int(expiry) if expiry else None
    if expires_at is not None and _now(now) >= expires_at:
        raise TokenError(f"the {use.noun} has expired")
    if (
        use.max_ttl_s is not None
        and expires_at is not None
        and expires_at > _now(now) + use.max_ttl_s + _CLOCK_SKEW_S
    ):
        raise TokenError(f"the {use.noun} lives longer than {use.max_ttl_s} s: mint a shorter one")
    return Grant(tenant=tenant, conversation_id=conversation_id, expires_at=expires_at)
