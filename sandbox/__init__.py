"""Fake business services (bookings, refunds, and transfers that accept first and finish later)
honouring the IETF Idempotency-Key draft, with fault injection, for tests and drills.
`sandbox.app.create_app` builds the app; `sandbox.server.serve` runs it."""
