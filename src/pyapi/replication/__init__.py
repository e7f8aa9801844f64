"""Replication: leaders tracking followers (ISR, high watermark, acks=all) and followers fetching from leaders."""
