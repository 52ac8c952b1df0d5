"""Peer engines of the benchmark (Quix Streams, Faust): their apps and their virtual environments.

The ``*_app.py`` scripts run with the peer's own interpreter (``.cache/bench-venvs/<name>-<version>/``) and
import nothing from this repository; they implement the benchmark's shared topologies the way each
framework's documentation does.
"""
