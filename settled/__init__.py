"""settled: durable, verified state for the consequential actions of voice and chat assistants.

This folder is the ground floor: everything else stands on it and it imports nothing above it.
- `settled.domain`: the pure domain (states, kinds, the action state machine, sentences, wire models);
- `settled.temporal`: the names and payloads Temporal sees (workflow ids, search attributes, the codec);
- `settled.runtime`: settings, log lines, the dev-stack starter;
- `settled.business`: talking to business services (secrets, request shapes, answer mapping, handlers).
The public faces: `settled.client` (the typed client), `settled.handlers` (a code kind's types) and
`settled.codec.new_key`. The parts that orchestrate stand above, in top-level folders of their own
(`workflows/`, `activities/`, `gateway/`, `workers/`, `api/`, `adapters/`, `cli/`: docs/architecture.md).
"""
