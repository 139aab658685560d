"""`GET /c/{conversation_id}`: the text channel page, and its two static assets.

One HTML template, one script, one stylesheet, all served from this package: nothing loads from
anywhere else (the Content-Security-Policy says so too). The page itself holds no state; its script
reads the conversation through the /v1 API, with the link token when API keys are configured.
"""

import hashlib
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from settled.domain.kinds import Kinds
from settled.domain.models import IDENTIFIER_PATTERN
from settled.tokens import PAGE_LINK, TokenError, verify

router = APIRouter(tags=["page"], include_in_schema=False)

STATIC = Path(__file__).parent / "static"
_CONVERSATION = re.compile(IDENTIFIER_PATTERN)
# The page talks to its own origin only; no inline script or style, no framing (clickjacking of the
# controls), and no Referer, which would carry the link token.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str

    @property
    def version(self) -> str:
        return hashlib.sha256(self.body).hexdigest()[:12]


# Read once at import: the assets are part of the code, and their hash versions the URLs, so a
# browser may cache them for good and still never runs a stale script against a new page.
ASSETS: dict[str, Asset] = {
    "page.js": Asset((STATIC / "page.js").read_bytes(), "text/javascript; charset=utf-8"),
    "page.css": Asset((STATIC / "page.css").read_bytes(), "text/css; charset=utf-8"),
    "icon.svg": Asset((STATIC / "icon.svg").read_bytes(), "image/svg+xml"),
}
TEMPLATE = Template((STATIC / "page.html").read_text())


@router.get("/c/_assets/{name}")
async def asset(name: str) -> Response:
    found = ASSETS.get(name)
    if found is None:
        return Response("not found", status_code=404, media_type="text/plain")
    headers = {"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"}
    return Response(found.body, media_type=found.media_type, headers=headers)


def _kinds_view(kinds: Kinds) -> dict[str, dict[str, object]]:
    """What the page needs of each kind: its words, and which controls its contract allows."""
    return {
        kind.name: {
            "description": kind.description,
            "requires_authorization": kind.requires_authorization,
            "compensable": kind.compensable,
        }
        for kind in kinds
    }


def _refusal(status: int, title: str, detail: str) -> HTMLResponse:
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{html.escape(title)}</title><link rel="icon" href="/c/_assets/icon.svg?v='
        f'{ASSETS["icon.svg"].version}" type="image/svg+xml"><link rel="stylesheet" '
        f'href="/c/_assets/page.css?v={ASSETS["page.css"].version}"></head><body><main class="refusal">'
        f"<h1>{html.escape(title)}</h1><p>{html.escape(detail)}</p></main></body></html>"
    )
    return HTMLResponse(body, status_code=status, headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})


@router.get("/c/{conversation_id}", response_class=HTMLResponse)
async def conversation_page(conversation_id: str, request: Request, t: str | None = None) -> HTMLResponse:
    if not _CONVERSATION.fullmatch(conversation_id):
        return _refusal(404, "No such conversation", "This link does not point to a conversation.")
    keys: dict[str, str] = request.app.state.settings.api_keys
    if keys:
        try:
            link = verify(PAGE_LINK, t or "", keys)
        except TokenError as error:
            detail = f"This page opens only from the link you were sent, and {error}. Ask us for a new one."
            return _refusal(401, "This link can't be opened", detail)
        if link.conversation_id != conversation_id:
            return _refusal(401, "This link can't be opened", "The link is for another conversation.")
    page = TEMPLATE.substitute(
        conversation_id=html.escape(conversation_id),
        kinds=html.escape(json.dumps(_kinds_view(request.app.state.gateways.kinds)), quote=True),
        css_version=ASSETS["page.css"].version,
        js_version=ASSETS["page.js"].version,
        icon_version=ASSETS["icon.svg"].version,
    )
    # no-store: its URL carries the link token, so no cache should keep a copy.
    return HTMLResponse(page, headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})
