"""Fuzzing the command line: hostile inputs (``inputs``), each run as a process of its own (``sandbox``), a long campaign (``campaign``).

``stateful_tests/test_fuzz.py`` runs a few hundred cases in ``make test``;
``make fuzz`` runs ``python -m stateful_tests.fuzzing.campaign`` (10,000).
"""
