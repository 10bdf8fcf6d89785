"""The clockwork: our scheduler wrapper, cluster-wide job runs, reminders and tasks."""
