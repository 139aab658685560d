"""The `settled` command: `main` parses and hands over; `parts` runs the processes (dev, worker, api,
sandbox); `operators` serves the operators' commands (list, status, replay, …)."""
