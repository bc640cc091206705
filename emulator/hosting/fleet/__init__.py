"""The live fleet: variants, instances and routing (variants.py), the plan an instance starts from,
the deployer that starts and stops containers as SageMaker does, readiness, the container call
(invoker.py), container logs and exit watchers."""
