"""Report builders: pure functions from snapshots and decisions to rows, markdown and Pushgateway metrics."""
