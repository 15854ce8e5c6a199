"""diskplan: see every partition on its physical blocks, plan aligned layouts, commit them safely.

Layers, lowest first (a test keeps the direction): ``model`` (pure), ``backend`` (owns pyparted),
``discovery`` (owns pyudev), ``ui`` (Textual), ``cli`` (entry points).
"""

__version__ = "0.1.0"
