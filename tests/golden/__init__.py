"""Golden workflow histories, made by real runs of the scenarios in `record.py`.

`tests/unit/test_replay.py` replays them against the current code in every `make test`, so a change
that would break running workflows (a changed command sequence without `workflow.patched`) fails CI.
Regenerate with `make golden` only when a change is meant to be incompatible and old workflows are drained.
"""
