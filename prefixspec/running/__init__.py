"""Running checks: the lockstep, the engine workload, the machines, the stages of a check, shrinking, the hunt."""
