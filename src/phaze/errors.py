"""User-facing errors. The CLI prints ``str(err)`` on one line and exits with status 2."""


class PhazeError(Exception):
    """A mistake in what the user asked for; the message says what is wrong and how to fix it."""


class ConfigError(PhazeError):
    """A model, accelerator, cluster or space description is malformed or inconsistent."""


class InfeasibleError(PhazeError):
    """The request is well-formed but has no answer (e.g. the model fits on no plan)."""


class StoreError(PhazeError):
    """A results store cannot be read or does not match the requested run."""
