"""Prefect tasks: retries, timeouts and logging around the library's plain functions.

Nothing here decides anything; decisions live in ``gpuaas.policies`` and are pure.
"""
