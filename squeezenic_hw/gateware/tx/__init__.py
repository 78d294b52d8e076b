"""The TX lane (host to wire) and its own stages: controller, packer, ring."""
