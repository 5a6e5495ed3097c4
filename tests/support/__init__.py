"""Helpers the tests share that are not fixtures (tests take them through tests/conftest.py)."""
