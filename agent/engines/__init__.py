"""Context engines and the strategies they are built from."""
