"""Entry points: ``diskplan`` (the planner), ``diskplan check|export|apply|restore``."""
