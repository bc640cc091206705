"""The container-runtime port. Only this package imports the docker SDK."""
