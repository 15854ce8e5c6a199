"""libparted and its isolation: the one module that imports pyparted, the forked reading children
and the namespaces that keep an image alone for libparted's eyes."""
