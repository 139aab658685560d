"""Signed links to the text page of one conversation.

With API keys configured, the page URL carries a link token: `/c/{conversation_id}?t=TOKEN`, a token
of the one signing scheme of `settled.tokens` (its page-link use, `sl1.`): it names its tenant, its
conversation and an optional expiry, is signed with the tenant's API key, and opens that one
conversation only.

Mint a link in Python:

    from settled.api.page.links import mint_link
    url = mint_link(settings, "c-42", tenant="tenant_a", base_url="https://assist.example", ttl_s=86400)

or on the command line (reads SETTLED_API_KEYS): `settled page-link c-42 --tenant tenant_a --ttl 86400`.
Without API keys the page is open and the link carries no token.
"""

import re
import time
from urllib.parse import quote

from settled.domain.models import IDENTIFIER_PATTERN
from settled.runtime.config import Settings
from settled.tokens import PAGE_LINK, sign, signing_key

_CONVERSATION = re.compile(IDENTIFIER_PATTERN)


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
    key = signing_key(settings.api_keys, tenant)
    if key is None or tenant is None:
        return url
    expires_at = None if ttl_s is None else int((time.time() if now is None else now) + ttl_s)
    return f"{url}?t={sign(PAGE_LINK, key, tenant, conversation_id, expires_at)}"
