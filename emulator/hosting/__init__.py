"""The hosting layer: SageMaker hosting's behaviour, in rooms by concern (docs/architecture.md).

endpoints/ (the HostingService facade and an endpoint's life), fleet/ (the live instances and the
container call), scaling/ (Application Auto Scaling), monitoring/ (metrics and CloudWatch alarms);
executors.py and state_files.py are shared. Rooms import downwards only: scaling -> endpoints |
monitoring -> fleet (an import-linter contract in pyproject.toml)."""
