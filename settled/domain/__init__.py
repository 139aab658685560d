"""The pure domain: states, templates, kinds, wire models, verdicts, the action state machine and the
sentences it derives. No Temporal, no HTTP, no I/O (an import-linter contract); unit-tested alone."""
