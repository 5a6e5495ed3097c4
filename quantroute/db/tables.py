"""Imports every table module so SQLModel.metadata knows the whole schema (Alembic and tests use it).
Each feature area adds its own module here and its own migration branch off `0001_core`."""

from quantroute.db import audit, policy_state  # noqa: F401
from quantroute.db import node, request_log, request_stats, session_pin  # noqa: F401  (router)
from quantroute.db import eval as _eval  # noqa: F401  (evals)
from quantroute.db import user  # noqa: F401  (dashboard users)
from quantroute.db import rollout  # noqa: F401  (rollouts)
from quantroute.db import loadtest  # noqa: F401  (staircase load tests)
from quantroute.db import controller, notification  # noqa: F401  (rollout controller, webhooks)
