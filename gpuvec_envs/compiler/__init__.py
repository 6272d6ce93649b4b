"""Compilation strategies and the run-time controls of compiled calls."""
