"""Platform adapters: the interface (base) and one package per platform."""
