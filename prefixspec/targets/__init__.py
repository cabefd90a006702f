"""The caches under test: loaded from ``module:factory``, driven over a pipe, planted with bugs, or recorded."""
