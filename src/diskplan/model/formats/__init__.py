"""Plan files and the formats plans travel in: JSON plans, sfdisk scripts, Ansible, Ignition,
systemd-repart, and the LVM headers of the demos."""
