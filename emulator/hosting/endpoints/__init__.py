"""An endpoint's life: `HostingService` (service.py) assembled from its parts: resources and their
status, deployments, reconciliation after a restart, invocation, updates and rollouts, instance
health, logs; `state.json`."""
