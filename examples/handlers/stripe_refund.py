"""A refund through the official Stripe SDK, as a code kind:
`handler = "examples.handlers.stripe_refund:refund"` in a kinds file.

The handler reports what Stripe said; settled decides what it means (the commit horizon, when to look
up, whether a re-send is safe). So the SDK's own retries are off (`max_network_retries=0`): a request
whose answer is lost is settled's to resolve, not the SDK's to repeat.

- The key is read from $STRIPE_API_KEY at every call: never stored on the object, never logged.
- $STRIPE_API_BASE points the SDK elsewhere (tests: localstripe behind a fault proxy); default Stripe.
- Dispatch puts the operation key into the refund's metadata and sends it as the Idempotency-Key.
- Lookup lists the charge's refunds and picks the one whose metadata.operation_id is the key.
"""

import os
from typing import Any

import httpx
import stripe

from settled.handlers import Applied, NotApplied, NotSent, Pending, Rejected, Request, Unknown

DEFAULT_API_BASE = "https://api.stripe.com"
# Statuses that say "not now" or "conflict" rather than "no": the refund may still have been made.
_MAYBE_APPLIED_4XX = frozenset({408, 409, 425, 429})


class StripeRefund:
    # Against the real API this would be True: the SDK sends `idempotency_key=request.operation_key`
    # and Stripe returns the first refund for a repeated key (for 24 hours). It is False here because
    # the tests run against localstripe, which ignores Idempotency-Key: a re-send would refund twice.
    # With False, a refund whose answer was lost is looked up, never re-sent blindly.
    deduplicates = False
    # The charge's refund list is Stripe's own record: a refund missing from it (past the commit
    # horizon) was not made.
    authoritative_lookup = True

    def _client(self, request: Request) -> tuple[stripe.StripeClient, stripe.HTTPXClient]:
        # The SDK gives up a little before settled does, so its own answer (a timeout) is what counts.
        http = stripe.HTTPXClient(timeout=max(0.1, request.timeout_s * 0.9))
        client = stripe.StripeClient(
            os.environ["STRIPE_API_KEY"],
            base_addresses={"api": os.environ.get("STRIPE_API_BASE", DEFAULT_API_BASE)},
            max_network_retries=0,
            http_client=http,
        )
        return client, http

    async def dispatch(self, request: Request) -> Applied | Pending | Rejected | Unknown | NotSent:
        client, http = self._client(request)
        try:
            created = await client.v1.refunds.create_async(
                {
                    "charge": request.params["charge"],
                    "amount": int(request.params["amount"]),
                    "metadata": {"operation_id": request.operation_key},
                },
                {"idempotency_key": request.operation_key},
            )
        except stripe.StripeError as error:
            return _failure(error, sent_words="the refund")
        finally:
            await http.close_async()
        return _refund_answer(created.to_dict())

    async def lookup(self, request: Request) -> Applied | Pending | NotApplied | Rejected | Unknown:
        client, http = self._client(request)
        try:
            page = await client.v1.refunds.list_async({"charge": request.params["charge"], "limit": 100})
        except stripe.StripeError as error:
            answer = _failure(error, sent_words="the lookup")
            # A lookup that could not be made or was refused proves nothing either way.
            return answer if isinstance(answer, Unknown) else Unknown(getattr(answer, "reason", "no answer"))
        finally:
            await http.close_async()
        for refund in (item.to_dict() for item in page.data):
            if (refund.get("metadata") or {}).get("operation_id") == request.operation_key:
                return _refund_answer(refund)
        if page.has_more:  # more than 100 refunds of one charge: ours may be on a later page
            return Unknown("the charge has more refunds than one page holds")
        return NotApplied()

    # No compensate: a refund cannot be taken back.


def _refund_answer(refund: dict[str, Any]) -> Applied | Pending | Rejected:
    """What a refund object says: succeeded is done; failed and canceled are final; the rest (pending,
    requires_action) is accepted and not finished."""
    status = refund.get("status")
    if status == "succeeded":
        return Applied(reference=refund["id"])
    if status in ("failed", "canceled"):
        return Rejected(f"the refund {status}: {refund.get('failure_reason') or 'no reason given'}")
    return Pending(reference=refund.get("id"))


def _failure(error: stripe.StripeError, sent_words: str) -> Rejected | Unknown | NotSent:
    if isinstance(error, stripe.APIConnectionError):
        # The SDK wraps every transport error alike; the httpx error it came from tells whether the
        # request ever left: no connection means nothing reached Stripe.
        if isinstance(error.__cause__, httpx.ConnectError | httpx.ConnectTimeout):
            return NotSent(f"could not connect to Stripe ({type(error.__cause__).__name__})")
        return Unknown(f"no answer from Stripe ({type(error.__cause__ or error).__name__})")
    status = error.http_status
    message = error.user_message or "no reason given"
    if isinstance(error, stripe.AuthenticationError):
        return Rejected(f"Stripe refused our credentials ({status}: {message})")
    if isinstance(error, stripe.IdempotencyError):
        return Unknown(f"Stripe saw this key before ({status}): {message}")
    if status is not None and 400 <= status < 500 and status not in _MAYBE_APPLIED_4XX:
        return Rejected(f"Stripe refused {sent_words} ({status}: {message})")
    return Unknown(f"Stripe answered {status}: {message}")


refund = StripeRefund()
