"""Prefect flows: thin orchestration over ``tasks``. One module per flow."""
