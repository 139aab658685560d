"""A code kind for the end-to-end tests: the sandbox's booking service called from Python, as a team
would wrap its own client. Imported by the stack's worker processes (`handler = "tests.e2e...`)."""

import os

import httpx

from settled.handlers import Applied, NotApplied, NotSent, Rejected, Request, Unknown


class SandboxBooking:
    deduplicates = True  # the bookings service deduplicates on Idempotency-Key
    authoritative_lookup = True

    def _url(self) -> str:
        return os.environ["SETTLED_SANDBOX_URL"]  # read when called, like a credential would be

    async def dispatch(self, request: Request) -> Applied | Rejected | Unknown | NotSent:
        headers = {"Idempotency-Key": request.operation_key}
        try:
            async with httpx.AsyncClient(base_url=self._url(), timeout=request.timeout_s) as http:
                answer = await http.post("/bookings", json=request.params, headers=headers)
        except httpx.ConnectError as error:
            return NotSent(str(error))
        except httpx.HTTPError as error:
            return Unknown(type(error).__name__)
        if answer.status_code in (200, 201):
            return Applied(answer.json()["id"])
        if answer.status_code == 422:
            return Rejected(answer.text[:200])
        return Unknown(f"answered {answer.status_code}")

    async def lookup(self, request: Request) -> Applied | NotApplied | Unknown:
        async with httpx.AsyncClient(base_url=self._url(), timeout=request.timeout_s) as http:
            answer = await http.get(f"/bookings/by-key/{request.operation_key}")
        if answer.status_code == 200:
            return Applied(answer.json()["id"])
        return NotApplied() if answer.status_code == 404 else Unknown(f"answered {answer.status_code}")

    async def compensate(self, request: Request) -> Applied | Rejected | Unknown:
        async with httpx.AsyncClient(base_url=self._url(), timeout=request.timeout_s) as http:
            answer = await http.post(f"/bookings/{request.business_ref}/cancel", json={})
        return Applied() if answer.is_success else Unknown(f"answered {answer.status_code}")


class SlowBooking(SandboxBooking):
    """Never answers within the kind's timeout: settled must call it unknown, not failed."""

    async def dispatch(self, request: Request) -> Applied | Rejected | Unknown | NotSent:
        import asyncio

        await asyncio.Event().wait()
        raise AssertionError("unreachable")


booking = SandboxBooking()
slow_booking = SlowBooking()
