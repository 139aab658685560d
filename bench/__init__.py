"""`python -m bench`: what durability costs, measured side by side with the bare business call."""
