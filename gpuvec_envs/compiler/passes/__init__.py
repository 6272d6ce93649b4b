"""Passes over inductor's output, each switchable and reporting whether it applied."""
