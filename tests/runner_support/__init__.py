"""Helpers for the runner and reaper tests: real skill folders, C programs, process probes."""
