"""Comparison: the lockstep of a target beside the spec, the event mirror, the order a call can observe, delta debugging."""
