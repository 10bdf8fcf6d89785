"""What runs on a schedule: job setup, the overnight sweep, scheduled resets, upkeep, retention."""
