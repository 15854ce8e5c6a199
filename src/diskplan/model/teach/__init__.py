"""Teaching: the demo disks, exercises and what measure's numbers mean."""
