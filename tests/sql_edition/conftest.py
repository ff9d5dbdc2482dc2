"""Fixtures: both editions' clusters for the session (editions.py)."""

import pytest

from editions import Edition


@pytest.fixture(scope="session")
def native():
    e = Edition("native")
    yield e
    e.destroy()


@pytest.fixture(scope="session")
def sql():
    e = Edition("sql")
    yield e
    e.destroy()
