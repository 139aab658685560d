"""Talking to business services: secrets, request shapes, answer mapping and code kinds.

Below the activities (which do the I/O) and above the kinds file (which declares it): what a request
of a kind looks like, what its answer means, and how a kind's handler is imported and called.
"""
