"""Model data as a container sees it under /opt/ml/model: where a source points (sources.py), S3 and
local fetches, the digest-addressed cache, safe extraction and its limits; `ArtifactStore` (store.py)
is the facade. Used by hosting and by the contract tester; imports no hosting, wire or runtime."""
