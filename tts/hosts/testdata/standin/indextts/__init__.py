"""Stand-in for the indextts package (tests only): same API, no model."""
