"""``python -m app``: serve the web app (see app/main.py and docs/api.md)."""

from app.main import main

main()
