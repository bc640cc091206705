"""Asynchronous inference: each async endpoint's persisted request queue and the workers that take
requests to its instances, with S3 inputs and results (docs/async-inference.md)."""
