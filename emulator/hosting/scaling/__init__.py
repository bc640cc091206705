"""Application Auto Scaling for endpoint variants: `AutoScaler` (autoscaler.py) over the registry of
targets and policies, target tracking, step scaling, the actuator and `autoscaling.json`."""
