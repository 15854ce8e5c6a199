"""The pure model: geometry, grains, extents, tables, findings, plans. Imports nothing but the stdlib."""
