"""settled: durable, verified state for the consequential actions of voice and chat assistants.

The pure core lives here: states (`states`), kinds (`kinds`), the action state machine
(`machine`), the customer-facing sentences (`say`) and the wire models (`models`). Temporal
workflows (`workflows/`), the I/O (`activities/`), the worker (`workers/`) and the HTTP edge
(`api/`) all derive from it.
"""
