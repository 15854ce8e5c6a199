"""Findings: where a partition lies, what a table is, where each layer's data lands; the code
registry, the report check prints, and what the other tools would say."""
