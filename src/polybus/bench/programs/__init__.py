"""Small polybus programs the benchmarks run: plain server modules, timing clients, TOML.

The clients time their own loops (so start-up of processes and connections is never in
a figure) and return the per-repetition figures as the run's result.
"""
