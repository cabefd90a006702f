"""Fuzzing the command line: each case a process of its own (``sandbox``, ``server``), hostile traces (``traces``),
every family of cases with its documented outcome (``plans``), and the long campaign (``campaign``).

``stateful_tests/test_fuzz.py`` runs a few hundred cases in ``make test``;
``make fuzz`` runs ``python -m stateful_tests.fuzzing.campaign`` (10,000).
"""
