"""Tests against real services from PyPI (localstripe, Radicale), through settled and raw."""
