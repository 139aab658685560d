"""`python -m settled.bench`: what durability costs, measured side by side with the bare business call."""
