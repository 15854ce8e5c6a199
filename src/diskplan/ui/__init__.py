"""The Textual planner: the sector map (``sectormap``), its panels, screens and the app."""
