"""The pure model: geometry, grains, extents, tables, findings, plans, the storage stack inside a
partition. Imports nothing but the stdlib."""
