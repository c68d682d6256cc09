"""capplan's face: the typer CLI (`cli.py`, one module per command in `commands/`), the demo and
`python -m capplan`."""
