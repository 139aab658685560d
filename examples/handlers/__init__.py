"""Code kinds: business calls written in Python (a vendor SDK) instead of a kinds file's HTTP keys."""
