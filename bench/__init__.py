"""Benchmarks (`make bench`): see ../shared/BENCH.md for what is measured and the bars."""
