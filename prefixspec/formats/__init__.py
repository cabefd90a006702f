"""The texts the checker reads and writes: traces (``trace``) and the line protocol (``protocol``)."""
