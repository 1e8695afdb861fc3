"""Reports: tables for the terminal, JSON/CSV for programs, plots (optional [plot] extra)."""
