"""The hostile suite's servers in `make test`: production's settings with the quick password hash
of tests/hashers.py. Their sign-ins (a person's login measured beside a deletion, six loops of
guesses at unknown names) cost them about 45 s of CPU at production's hash, a tenth of the
suite's. `make hostile`, which prints the figures, keeps production's hash
(PREVIOUSLY_HOSTILE_FIGURES=1, tests/hostile/server.py)."""

from previously.settings import *  # noqa: F403

PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2"]
