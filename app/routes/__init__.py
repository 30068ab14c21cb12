"""The HTTP routes: ``api`` (JSON), ``stream`` (Server-Sent Events), ``pages`` (HTML)."""
