"""The ``prefixspec`` command line: one module per command, ``main`` assembles them."""
