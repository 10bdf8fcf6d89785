"""The context strategies, one module each, cheapest first."""
