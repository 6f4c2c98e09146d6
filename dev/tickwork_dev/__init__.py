"""Tickwork's development harness (not part of the product's wheel or image).

``tickwork_dev.devcluster`` runs a local control plane, node, Redis and add-ons;
``tickwork_dev.demo`` runs Tickwork on them; ``tickwork_dev.reference`` is the
Vixie-cron reference the schedule tests compare against.
"""
