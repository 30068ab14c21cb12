"""Autograd Lens application layer: what runs the engine for people (the demo, later the web app).

The layers point one way: ``app`` uses ``engine``; ``engine`` never imports ``app``.
"""
