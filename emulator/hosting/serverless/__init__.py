"""Serverless inference: capacity on demand over the fleet (cold starts, MaxConcurrency, idle stop)."""
