"""The benchmarks: ``python -m bench [NAME ...] [--smoke]`` runs them, ``python -m bench.bench_NAME`` runs one.

A package (run from the repository root) so that a benchmark imports its neighbours and the shared
helpers as ``bench.*`` whatever the current directory's place on ``sys.path``: ``python bench/x.py``
would put ``bench/`` first and the repository root nowhere.
"""
