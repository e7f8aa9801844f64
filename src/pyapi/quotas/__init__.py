"""Client quotas as Kafka computes them (KIP-13, KIP-55, KIP-124, KIP-546).

``rate``: the sampled rate and the throttle time of a violation; ``entities``: quota entities, their
precedence, the quota keys and the validation of AlterClientQuotas; ``store``: where the configs live (a lone
broker's data dir, a cluster's ZooKeeper); ``manager``: the broker's view (current configs, one rate per
quota type and metric tags, the throttle time of each recorded value).
"""
