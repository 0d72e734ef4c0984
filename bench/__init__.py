"""Runs the benchmarks of every package (``make bench``)."""
