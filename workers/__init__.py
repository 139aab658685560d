"""The worker process: runs the workflows and the business activities."""
