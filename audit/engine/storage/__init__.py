"""What a run leaves on disk and how it is trusted: the run directory, the results records and their JSON, the manifest and its integrity key, the writer lock and the run cache."""
