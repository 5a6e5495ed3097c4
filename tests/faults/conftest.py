"""The fault suite runs against the router tests' simulated fleet and settings (one fleet per module)."""

from tests.router.conftest import make_settings, policies, sim  # noqa: F401 - fixtures shared with tests/router
