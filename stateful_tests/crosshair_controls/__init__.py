"""Planted bugs under the contracts of ``spec/arith.py``: the CrossHair gate must be seen to fail on each.

The modules are named without ``test_`` so that pytest does not collect
them; ``stateful_tests/test_crosshair.py`` runs the gate on them.
"""
