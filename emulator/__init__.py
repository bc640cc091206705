"""smlocal: Amazon SageMaker hosting, locally, on real Docker containers."""

__version__ = "0.1.0"
