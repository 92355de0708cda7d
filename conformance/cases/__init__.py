from conformance.cases.table import *  # noqa: F401,F403  (temporary during the move)
from conformance.cases.table import CASES, STAGES, Case, Expectation, InputSpec  # noqa: F401
