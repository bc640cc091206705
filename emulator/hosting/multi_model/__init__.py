"""Multi-model endpoints (spec §5): each instance's models, downloaded and loaded on demand through the
container's model API, kept while there is memory, evicted least recently used (docs/multi-model.md)."""
