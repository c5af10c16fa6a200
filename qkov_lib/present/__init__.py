"""What a reader sees: figures (plotly) and tables for reading."""
