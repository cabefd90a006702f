"""Drivers: what makes the calls (the call and engine machines, the engine workload, the golden trace, the scale stage) and counts what they reached."""
