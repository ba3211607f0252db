"""Grad mode: whether op calls record what backward needs."""

grad_enabled = True
anomaly_detection = False
