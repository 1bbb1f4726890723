"""Errors the CLI turns into a one-line message and a non-zero exit code."""


class T2RagError(Exception):
    """Base class for expected, user-facing errors (bad input, bad config, missing data)."""


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (library errors often span many)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class DataError(T2RagError):
    """The dataset is missing, unreadable or fails validation."""


class InputError(T2RagError):
    """A user-supplied file or argument is malformed."""


class ConfigError(T2RagError):
    """A run configuration is invalid."""
