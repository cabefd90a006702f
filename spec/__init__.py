"""The definition of a block-granular prefix cache, and nothing else.

- ``spec.api``: the interface, its types and errors (what every cache speaks);
- ``spec.arith``: the arithmetic of blocks, with the contracts CrossHair proves;
- ``spec.model``: ``SpecCache``, the executable specification, rules R1-R13 in order, a module
  each (``spec/README.md`` states them in prose).

This package imports nothing of its own modules here, so that ``import impl``
(which needs ``spec.api`` alone) never loads the model or the arithmetic.
The checker that runs these rules against a cache is the ``prefixspec`` package.
"""
