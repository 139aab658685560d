"""All I/O with business systems: the activities, over one shared httpx client."""
