"""A module plugin that cannot be imported: it needs a package nobody installed."""

import t2rag_no_such_dependency  # noqa: F401
